"""What the bench/ scripts share: the machine's description and gpujobd's /metrics counters.

Imported by its siblings (run as `python3 bench/NAME.py`, so bench/ is on sys.path)."""
import re


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or "?"."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def load_average():
    """The 1, 5 and 15 minute load averages ("0.12 0.34 0.56"), or "?"."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def model_counters(metrics_text, model, names=("inference_count", "inference_exec_count")):
    """{name: value} of gpujobd_NAME{model="MODEL",version="1"} in a /metrics page (0 when absent)."""
    v = {}
    for name in names:
        m = re.search(r'gpujobd_%s\{model="%s",version="1"\} (\d+)' % (name, re.escape(model)), metrics_text)
        v[name] = int(m.group(1)) if m else 0
    return v
