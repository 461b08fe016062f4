"""A stand-in ``pynvml`` whose NVML answers with no device: put this directory first on
``PYTHONPATH`` to make a subprocess's accelerator probe say CPU-only (``"0"``), as a real
NVML does on a machine without an NVIDIA GPU."""


def nvmlInit() -> None:
    return None


def nvmlShutdown() -> None:
    return None


def nvmlDeviceGetCount() -> int:
    return 0
