"""The closing report the Python examples print like the C++ ones (examples/common/report.hpp):
which backends ran ops, what fell back to cpu, and the default backend."""
import tinyfin as tf


def backend_report():
    s = tf.stats()
    ran = [f"{name} ({b['ops']} ops)" for name, b in s["backends"].items() if b["ops"]]
    print("backends that ran ops: " + (" ".join(ran) if ran else "none"))
    fb = ", ".join(f"{op} x{n}" for op, n in s["fallbacks"].items())
    print(f"fallbacks: {s['total_fallbacks']}" + (f" ({fb})" if fb else ""))
    print(f"default backend: {tf.backend_name()}")
