"""The suite's order (tests/conftest.py): under `pytest -n 2` each worker takes whole modules
in collection order, so the longest module comes first and every module with a slow test
before the quick ones; within a module, the order of its file."""

from pathlib import Path

from conftest import LONGEST_MODULE, pytest_collection_modifyitems


class Item:
    """What the hook reads of a collected test: its file and whether it is marked slow."""

    def __init__(self, module: str, name: str, slow: bool = False):
        self.path, self.name, self.slow = Path("tests") / module, name, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def test_the_longest_module_first_then_slow_modules_then_the_rest():
    items = [Item("test_a.py", "a1"), Item("test_a.py", "a2"),
             Item("test_b.py", "b1"), Item("test_b.py", "b2", slow=True), Item("test_b.py", "b3"),
             Item(LONGEST_MODULE, "long1", slow=True), Item(LONGEST_MODULE, "long2", slow=True),
             Item("test_c.py", "c1", slow=True), Item("test_d.py", "d1")]
    pytest_collection_modifyitems(items)
    # a module with one slow test moves whole; each module keeps its own order
    assert [i.name for i in items] == ["long1", "long2", "b1", "b2", "b3", "c1", "a1", "a2", "d1"]


def test_the_suite_has_the_longest_module():
    assert (Path(__file__).parent / LONGEST_MODULE).is_file()
