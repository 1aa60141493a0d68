"""Backend selection from Python: backend_set, backend_name, backends(), device()."""
import os

import pytest

import tinyfin as tf
from conftest import loaded_backends, other_backends


def test_auto_picks_the_expected_backend():
    assert tf.backend_set("auto")
    assert tf.backend_name() == os.environ.get("TINYFIN_TEST_AUTO_BACKEND", "cpu")


@pytest.mark.parametrize("name", loaded_backends())
def test_backend_set_each(name):
    assert tf.backend_set(name)
    assert tf.backend_name() == name
    t = tf.ones(3)
    assert t.device.type == name and str(t.device) == name + ":0" or str(t.device) == name
    assert tf.default_device() == t.device


def test_priority_list_and_unknown():
    others = other_backends()
    first = others[0] if others else "cpu"
    assert tf.backend_set(f"no-such-backend,{first}")
    assert tf.backend_name() == first
    assert not tf.backend_set("no-such-backend")
    assert tf.backend_name() in loaded_backends()


def test_backends_list():
    bs = tf.backends()
    assert [b["name"] for b in bs] == tf.available_backends()
    assert bs[-1]["name"] == "cpu"
    for b in bs:
        assert b["devices"], b
        assert {"name", "kind", "memory_total", "memory_free", "host_addressable"} <= set(b["devices"][0])


def test_device_objects():
    d = tf.device("cpu")
    assert d.type == "cpu" and d.index == 0 and d == "cpu" and repr(d) == "device(type='cpu', index=0)"
    assert tf.device("cpu", 0) == d
    for name in other_backends():
        dev = tf.device(f"{name}:0")
        assert dev.type == name and tf.ones(2, device=dev).device == dev
    with pytest.raises(tf.DeviceError):
        tf.device("nosuch:0")
    with pytest.raises(tf.DeviceError):
        tf.ones(2, device="cpu:5")


def test_info_matches_tinyfin_info_json():
    import json
    import subprocess
    info = tf.info()
    assert info["schema"] == "tinyfin-info/1"
    assert info["ops"] == tf.op_names() and "conv2d" in info["ops"]
    names = {p["name"] for p in info["plugins"] if p["outcome"] == "loaded"}
    assert set(tf.available_backends()) <= names
    # The build tree's tool beside PYTHONPATH=<builddir>/python (an installed package has none).
    pythonpath = os.environ.get("PYTHONPATH", "")
    tool = os.path.join(pythonpath.split(os.pathsep)[0], "..", "tools", "tinyfin-info")
    if pythonpath and os.path.exists(tool):
        cli = json.loads(subprocess.run([tool, "--json"], capture_output=True, check=True, text=True).stdout)
        assert cli["ops"] == info["ops"] and cli["core"] == info["core"]
        assert [p["path"] for p in cli["plugins"]] == [p["path"] for p in info["plugins"]]


def test_select_backend_for_memory_fits_and_selects():
    assert tf.select_backend_for_memory(1024, "cpu") == "cpu"
    assert tf.backend_name() == "cpu"
    tf.backend_set("auto")
    plain = tf.backend_name()
    assert tf.select_backend_for_memory(1024) == plain  # "" means TINYFIN_BACKEND (auto)


def test_select_backend_for_memory_none_fits():
    huge = 1 << 60  # 1 EiB
    with pytest.raises(tf.OutOfMemoryError) as e:
        tf.select_backend_for_memory(huge, "auto")
    assert isinstance(e.value, MemoryError)
    text = str(e.value)
    assert "1099511627776.0 MiB" in text and "cpu:0 (" in text and "MiB free" in text
    with pytest.raises(tf.OutOfMemoryError):
        tf.select_backend_for_memory(huge, "cpu")
    with pytest.raises(TypeError):
        tf.select_backend_for_memory(-1)  # a negative requirement is not a size


def test_stats_bytes_in_use_and_peak():
    tf.synchronize()
    base = tf.stats()["backends"]["cpu"]["bytes_in_use"]
    tf.reset_stats()
    assert tf.stats()["backends"]["cpu"]["peak_bytes_in_use"] == base
    a = tf.zeros(1024)  # 4 KiB
    b = tf.zeros(2048)  # 8 KiB
    assert tf.stats()["backends"]["cpu"]["bytes_in_use"] == base + 12288
    del a, b
    c = tf.zeros(256)
    s = tf.stats()["backends"]["cpu"]
    assert s["bytes_in_use"] == base + 1024 and s["peak_bytes_in_use"] == base + 12288
    tf.reset_stats()
    assert tf.stats()["backends"]["cpu"]["peak_bytes_in_use"] == base + 1024
    del c
