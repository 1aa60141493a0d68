"""tinyfin's Debian packages installed on this machine (scripts/test-packaging debs, as root on
CI's throwaway machine): the installed tools, Python package and development files work with no
environment variable, and the plugin story holds: installing or removing one
tinyfin-plugin-* package is all it takes to add or remove that backend from tinyfin-info's
report, from TINYFIN_BACKEND's choice and from Python's available_backends().

TINYFIN_DEB_DIR holds the .debs (reinstalled by the plugin tests), TINYFIN_SOURCE_DIR the
checkout (for use_installed.cpp)."""
import glob
import json
import os
import pathlib
import subprocess

import pytest

DEB_DIR = pathlib.Path(os.environ["TINYFIN_DEB_DIR"])
SOURCE_DIR = pathlib.Path(os.environ["TINYFIN_SOURCE_DIR"])
HERE = SOURCE_DIR / "tests" / "packaging"
MULTIARCH = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True, text=True,
                           check=True).stdout.strip()
PLUGIN_DIR = f"/usr/lib/{MULTIARCH}/tinyfin/plugins"
# Every plugin package CI builds but cpu (libtinyfin1 depends on it).
OPTIONAL_PLUGINS = ["blas", "vulkan", "opengl", "opencl"]


def run(cmd, env=None, cwd="/", check=True):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def installed(package):
    done = run(["dpkg-query", "-W", "-f=${db:Status-Status}", package], check=False)
    return done.returncode == 0 and done.stdout == "installed"


def report(backend="auto"):
    env = dict(os.environ, TINYFIN_BACKEND=backend)
    return json.loads(run(["/usr/bin/tinyfin-info", "--json"], env=env).stdout)


def loaded(doc):
    return {p["name"]: p for p in doc["plugins"] if p["outcome"] == "loaded"}


def expected_auto_choice(doc):
    """auto's rule (README, TINYFIN_BACKEND), from the report: the loaded backend of highest
    priority above cpu's whose device 0 is not software-emulated, else cpu."""
    ranked = sorted((p for p in loaded(doc).values() if p["name"] != "cpu" and p["priority"] > 0),
                    key=lambda p: -p["priority"])
    for p in ranked:
        if p["devices"] and p["devices"][0]["kind"] != "software-gpu":
            return p["name"]
    return "cpu"


def packages_built():
    """The .debs of the build, without the -dbgsym ones (not installed)."""
    return [deb for deb in glob.glob(str(DEB_DIR / "*.deb")) if "-dbgsym_" not in deb]


def test_all_packages_installed():
    for deb in packages_built():
        package = run(["dpkg-deb", "-f", deb, "Package"]).stdout.strip()
        assert installed(package), package


def test_libtinyfin_pulls_in_the_cpu_plugin():
    depends = run(["dpkg-query", "-W", "-f=${Depends}", "libtinyfin1"]).stdout
    assert "tinyfin-plugin-cpu" in depends


def test_tinyfin_info_lists_the_installed_plugins():
    doc = report()
    assert [e for e in doc["search_path"] if e["origin"] == "install"] == [{"path": PLUGIN_DIR, "origin": "install"}]
    packages = {name for name in ["cpu"] + OPTIONAL_PLUGINS if installed(f"tinyfin-plugin-{name}")}
    assert set(loaded(doc)) == packages
    for plugin in doc["plugins"]:
        assert os.path.dirname(plugin["path"]) == PLUGIN_DIR
    text = run(["/usr/bin/tinyfin-info"]).stdout
    for name in packages:
        assert f"{PLUGIN_DIR}/tinyfin-{name}.so" in text


def test_python_import_from_root():
    code = ("import tinyfin, numpy; t = tinyfin.ones(2) * 3; "
            "print(tinyfin.__file__); print(t.numpy().tolist()); print(tinyfin.available_backends())")
    out = run(["/usr/bin/python3", "-c", code], cwd="/").stdout.splitlines()
    assert out[0] == "/usr/lib/python3/dist-packages/tinyfin/__init__.py"
    assert out[1] == "[3.0, 3.0]"
    assert "cpu" in out[2]


def test_python_m_tinyfin_names_the_installed_plugin_dir():
    out = run(["/usr/bin/python3", "-m", "tinyfin"]).stdout
    assert f"{PLUGIN_DIR}" in out and "[install]" in out


def use_installed_ran(binary):
    out = run([str(binary)]).stdout
    lines = out.splitlines()
    assert lines and all(line.startswith("ok ") for line in lines), out
    return {line.split()[1] for line in lines}


def test_program_built_with_pkg_config(tmp_path):
    flags = run(["pkg-config", "--cflags", "--libs", "tinyfin"]).stdout.split()
    binary = tmp_path / "use-installed"
    run(["c++", "-std=c++20", str(HERE / "use_installed.cpp"), "-o", str(binary), *flags])
    assert run(["readelf", "-d", str(binary)]).stdout.count("libtinyfin.so.1") == 1
    assert "cpu" in use_installed_ran(binary)


def test_program_built_with_cmake_find_package(tmp_path):
    source = tmp_path / "src"
    (source / "cmake").mkdir(parents=True)
    (source / "use_installed.cpp").write_text((HERE / "use_installed.cpp").read_text())
    (source / "cmake" / "CMakeLists.txt").write_text((HERE / "cmake" / "CMakeLists.txt").read_text())
    build = tmp_path / "build"
    run(["cmake", "-S", str(source / "cmake"), "-B", str(build)])
    run(["cmake", "--build", str(build)])
    assert "cpu" in use_installed_ran(build / "use-installed")


@pytest.mark.parametrize("name", OPTIONAL_PLUGINS)
def test_removing_and_installing_a_plugin_package(name):
    package = f"tinyfin-plugin-{name}"
    deb = glob.glob(str(DEB_DIR / f"{package}_*.deb"))
    assert len(deb) == 1 and installed(package)
    before = report()
    assert name in loaded(before)
    assert report(name)["selection"]["selected"] == name
    assert report()["selection"]["selected"] == expected_auto_choice(before)
    assert any(name in note for note in before["selection"]["notes"])
    try:
        run(["dpkg", "--remove", package])
        after = report()
        assert name not in {p["name"] for p in after["plugins"]}
        assert not os.path.exists(f"{PLUGIN_DIR}/tinyfin-{name}.so")
        assert f"tinyfin-{name}.so" not in run(["/usr/bin/tinyfin-info"]).stdout
        assert after["selection"]["selected"] == expected_auto_choice(after)
        assert not any(name in note for note in after["selection"]["notes"])
        named = report(name)
        assert named["selection"]["selected"] == "cpu"
        assert any(note.startswith(f"unavailable: {name}") for note in named["selection"]["notes"])
        backends = run(["/usr/bin/python3", "-c", "import tinyfin; print(tinyfin.available_backends())"]).stdout
        assert f"'{name}'" not in backends
    finally:
        run(["dpkg", "--install", deb[0]])
    again = report()
    assert set(loaded(again)) == set(loaded(before))
    assert report(name)["selection"]["selected"] == name
