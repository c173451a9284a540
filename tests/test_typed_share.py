"""scripts/typed-share counts what mypy would call annotated: every
parameter but a method's self/cls, and the return (an __init__ may leave
it out)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_counts_fully_annotated_functions_per_folder(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text(textwrap.dedent("""\
        def full(x: int) -> int:
            def inner(y):  # nested: counted, not annotated
                return y
            return inner(x)

        def no_return(x: int):
            return x

        class C:
            def __init__(self, n: int):  # no return needed
                self.n = n

            def method(self) -> int:  # self needs none
                return self.n

            @staticmethod
            def static(a) -> None:  # a static method's first parameter is no self
                pass

        f = lambda x: x  # not a function definition
        """))
    (pkg / "sub" / "b.py").write_text("async def g(*args: int, **kw: str) -> None:\n    pass\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "typed-share"), str(pkg)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:-1]}
    assert rows["pkg"] == ["6", "5", "3", "50.0%"], out  # full, __init__, method of 6; inner unhinted
    assert rows["pkg.sub"] == ["1", "1", "1", "100.0%"], out
    assert out.splitlines()[-1] == "functions total 7, fully annotated 4 (57.1%), with any hint 6 (85.7%)", out
