"""The tinyfin wheel installed into a fresh venv (scripts/test-packaging wheel), run by that venv's
python from a directory outside the checkout, with no LD_LIBRARY_PATH, PYTHONPATH or
TINYFIN_PLUGIN_PATH: the package, libtinyfin.so and the plugins all come from the venv.

TINYFIN_WHEEL_VENV names the venv."""
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tinyfin as tf

VENV = pathlib.Path(os.environ["TINYFIN_WHEEL_VENV"]).resolve()
PACKAGE = pathlib.Path(tf.__file__).resolve().parent
PLUGIN_DIR = PACKAGE / "lib" / "tinyfin" / "plugins"


def mapped_files(name):
    """The files this process has mapped whose name starts with `name`."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    return {p for p in paths if os.path.basename(p).startswith(name)}


def test_environment_names_no_library_or_plugin_path():
    for variable in ("LD_LIBRARY_PATH", "PYTHONPATH", "TINYFIN_PLUGIN_PATH"):
        assert not os.environ.get(variable), variable


def test_package_comes_from_the_venv():
    assert VENV in PACKAGE.parents, PACKAGE
    assert pathlib.Path(tf._C.__file__).resolve().parent == PACKAGE


def test_libtinyfin_is_the_one_inside_the_package():
    tf.ones(1)  # loads the plugins too
    assert mapped_files("libtinyfin.so") == {str(PACKAGE / "lib" / "libtinyfin.so")}


def test_version_is_the_wheels():
    assert tf.__version__ == importlib.metadata.version("tinyfin")
    assert tf.__version__ == tf.info()["core"]["version"]


def test_info_names_the_plugin_directory_inside_the_package():
    report = tf.info()
    install = [entry["path"] for entry in report["search_path"] if entry["origin"] == "install"]
    assert install == [str(PLUGIN_DIR)]
    files = sorted(str(p) for p in PLUGIN_DIR.glob("*.so"))
    assert "tinyfin-cpu.so" in {os.path.basename(f) for f in files}
    assert sorted(p["path"] for p in report["plugins"]) == files
    # Every plugin the wheel carries loads (a GPU plugin finds Mesa's software devices on CI).
    assert {p["outcome"] for p in report["plugins"]} == {"loaded"}, report["plugins"]


def test_plugins_loaded_are_the_packages():
    tf.ones(1)
    for path in mapped_files("tinyfin-"):
        assert pathlib.Path(path).parent == PLUGIN_DIR, path


def test_ops_run_on_every_backend():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
    for backend in tf.available_backends():
        tf.backend_set(backend)
        got = (tf.tensor(a.tolist()) @ tf.tensor(b.tolist())).cpu().numpy()
        # [[0, 1, 2], [3, 4, 5]] @ [[1, 0], [0, 1], [1, 1]], by hand
        np.testing.assert_array_equal(got, [[2, 3], [8, 9]], err_msg=backend)
    tf.backend_set("cpu")


def test_python_m_tinyfin_prints_the_report():
    done = subprocess.run([sys.executable, "-m", "tinyfin"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"tinyfin {tf.__version__} (plugin ABI ")
    assert f"{PLUGIN_DIR}" in done.stdout and "[install]" in done.stdout
    for plugin in tf.info()["plugins"]:
        assert plugin["path"] in done.stdout
    as_json = subprocess.run([sys.executable, "-m", "tinyfin", "--json"], capture_output=True, text=True,
                             timeout=300)
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)["search_path"] == tf.info()["search_path"]


def test_tinyfin_info_script_in_the_venv():
    script = VENV / "bin" / "tinyfin-info"
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert str(PLUGIN_DIR) in done.stdout


@pytest.mark.skipif(not (PACKAGE / "lib" / "libtinyfin-dist.so").exists(), reason="built without MPI")
def test_dist_extension_loads_beside_the_core():
    import tinyfin.dist  # noqa: F401
    assert mapped_files("libtinyfin-dist.so") == {str(PACKAGE / "lib" / "libtinyfin-dist.so")}
