"""Test helpers shared by the training-loop tests (importable: pytest puts tests/ on sys.path)."""


class RecordingLive:
    """Stand-in for dvclive.Live with the two calls the training loops make; records them."""

    def __init__(self):
        self.rows, self.step = [], 0

    def log_metric(self, name, value):
        self.rows.append((self.step, name, value))

    def next_step(self):
        self.step += 1

    def curve(self, name):
        """Values logged as `train/<name>`, in step order."""
        return [v for _, n, v in self.rows if n == f"train/{name}"]
