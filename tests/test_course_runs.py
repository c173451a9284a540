"""Running a file of a course folder as it is (issue 24): a read-only copy
of it and the files beside it, in the runner's own sandbox, discarded after
the run; the course folder itself is never in a sandbox. Over the real
WebSocket against the real server; the attacks where isolation is promised
(local and docker)."""
import asyncio
import os

from loadtest.run_client import RunClient
from tests.conftest import People
from tests.live_support import a_class

LESSON = '''import os
import helper
print(helper.greet("class"))
print(open("data.txt").read().strip())
print(os.path.basename(__file__), os.path.basename(os.getcwd()))
'''
HELPER = 'def greet(who):\n    return f"Hello, {who}!"\n'

# Every way a program might change the course file or its folder; each is tried, and said.
ATTACK = r'''import os, shutil
here = os.path.dirname(os.path.abspath(__file__))
original = open(__file__).read()
tries = {
    "write the file": lambda: open(__file__, "w").write("hacked"),
    "append to the file": lambda: open(__file__, "a").write("hacked"),
    "delete the file": lambda: os.remove(__file__),
    "rename the file": lambda: os.rename(__file__, os.path.join(here, "moved.py")),
    "write a module beside it": lambda: open(os.path.join(here, "helper.py"), "w").write("hacked = 1"),
    "make a file beside it": lambda: open(os.path.join(here, "new.txt"), "w").write("x"),
    "make a file where it runs": lambda: open("new2.txt", "w").write("x"),
    "delete the folder": lambda: shutil.rmtree(here),
    "rename the folder": lambda: os.rename(here, here + "-moved"),
}
for name, attempt in tries.items():
    try:
        attempt()
        print("DONE", name)
    except OSError as e:
        print("REFUSED", name, type(e).__name__)
print("storage visible:", os.path.exists(STORAGE))
print("unchanged:", open(__file__).read() == original, sorted(os.listdir(here)))
'''
FILL = """n = 0
for size in (1 << 20, 4096):  # to the last page
    try:
        while True:
            n += 1
            open(f'/tmp/fill{n}', 'wb', buffering=0).write(b'x' * size)
    except OSError as e:
        print(e.strerror)
"""
LEFTOVERS = 'import glob\nprint("copies:", len(glob.glob("/tmp/pyclassroom-course-*")))\n'


def put(client, area, path, text):
    r = client.request("PUT", f"/api/files/{area}/{path}", data=text.encode(), headers={"If-Match": "*"})
    assert r.status_code == 200, r.text


def course_folder(client, area):
    """Every file and folder of a course folder, a file's text, as its teacher reads them."""
    tree = client.get(f"/api/files/{area}?tree=1")
    assert tree.status_code == 200, tree.text
    return {e["path"]: e["kind"] == "file" and client.get(f"/api/files/{area}/{e['path']}").json()["content"]
            for e in tree.json()["entries"]}


def run_course(server, client, area, path, timeout=30, **extra):
    """Run `path` of the course folder `area`: (the exit or error message, RunClient)."""
    async def go():
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            await rc.send(type="run", area=area, path=path, **extra)
            while True:
                message = await rc.receive(timeout)
                if message["type"] in ("exit", "error"):
                    return message, rc
    return asyncio.run(go())


def a_course(server, *students):
    """A teacher, a class with `students` and a course folder holding the
    lesson and what is beside it: (teacher, area)."""
    people = People(server)
    teacher = people.teacher("t")
    number = a_class(server, teacher, *students)
    area = f"class/{number}"
    put(teacher, area, "week2/lesson.py", LESSON)
    put(teacher, area, "week2/helper.py", HELPER)
    put(teacher, area, "week2/data.txt", "numbers 1 2 3\n")
    put(teacher, area, "week2/sub/other.py", "print('other')\n")
    return teacher, area


def test_a_teacher_runs_a_course_file_as_it_is_with_the_modules_beside_it(sandbox_server):
    teacher, area = a_course(sandbox_server)
    exit_, rc = run_course(sandbox_server, teacher, area, "week2/lesson.py")
    assert exit_["type"] == "exit" and exit_["reason"] == "ok", rc.messages
    assert rc.output("stdout") == "Hello, class!\r\nnumbers 1 2 3\r\nlesson.py course\r\n"
    # The teacher's own files got nothing of it.
    assert teacher.get("/api/files/home/week2/lesson.py").status_code == 404
    # An etag names the version the editor shows: another one does not run.
    exit_, rc = run_course(sandbox_server, teacher, area, "week2/lesson.py", etag="0" * 20)
    assert exit_["reason"] == "changed" and rc.output("stdout") == ""


def test_a_program_run_from_a_course_file_cannot_change_the_course_folder(isolated_server):
    teacher, area = a_course(isolated_server)
    env = isolated_server.env
    storage = os.path.join(env.get("STORAGE_ROOT") or os.path.join(env["DATA_DIR"], "storage"), *area.split("/"))
    storage = storage.replace("/class/", "/classes/")
    assert os.path.isdir(storage)  # where the course folder is on the host: not in the sandbox
    put(teacher, area, "week2/attack.py", ATTACK.replace("STORAGE", repr(storage)))
    before = course_folder(teacher, area)
    exit_, rc = run_course(isolated_server, teacher, area, "week2/attack.py")
    assert exit_["reason"] == "ok", rc.messages
    out = rc.output("stdout")
    tried = [line for line in out.splitlines() if line.startswith(("DONE", "REFUSED"))]
    assert len(tried) == 9 and all(line.startswith("REFUSED") for line in tried), out
    assert "storage visible: False" in out
    assert "unchanged: True ['attack.py', 'data.txt', 'helper.py', 'lesson.py']" in out, out
    assert course_folder(teacher, area) == before
    # The copy went with the run: the next one finds only its own.
    put(teacher, area, "week2/leftovers.py", LEFTOVERS)
    for _ in range(2):
        exit_, rc = run_course(isolated_server, teacher, area, "week2/leftovers.py")
        assert exit_["reason"] == "ok" and rc.output("stdout") == "copies: 1\r\n", rc.messages


def test_students_run_a_course_file_of_their_class_in_their_own_sandbox_and_no_other(local_server):
    people = People(local_server)
    ann, out = people.student("ann"), people.student("out")
    teacher, area = a_course(local_server, ann)
    put(teacher, area, "week2/proof.py", 'import os\nopen(os.path.join(os.environ["HOME"], "proof.txt"), "w")'
                                         '.write("ran")\nprint("ok")\n')
    exit_, rc = run_course(local_server, ann, area, "week2/lesson.py")
    assert exit_["reason"] == "ok" and rc.output("stdout").startswith("Hello, class!"), rc.messages
    # It ran as ann, with ann's home: what it writes there is hers, not the teacher's.
    exit_, rc = run_course(local_server, ann, area, "week2/proof.py")
    assert exit_["reason"] == "ok", rc.messages
    assert ann.get("/api/files/home/proof.txt").json()["content"] == "ran"
    assert teacher.get("/api/files/home/proof.txt").status_code == 404
    # Not her class's course folder, another area, a bad one: refused, nothing runs.
    for client, spec, code in ((out, area, "not_your_class"), (ann, f"user/{teacher.username}", "not_runnable_here"),
                               (ann, "checks/1", "not_runnable_here"), (ann, 7, "bad_field"),
                               (ann, "class/999999", None), (ann, "class/abc", None), (ann, "class/", None),
                               (ann, "class/1/../../home", None), (ann, "x" * 41, "bad_field")):
        message, rc = run_course(local_server, client, spec, "week2/lesson.py")
        assert message["type"] == "error" and message["error"] == (code or message["error"]) != "internal_error", message
        assert rc.output() == ""
    message, _ = run_course(local_server, ann, area, "week2")
    assert message["type"] == "error" and message["error"] == "not_a_file"
    message, _ = run_course(local_server, ann, area, "../../home/x.py")
    assert message["type"] == "error"


def test_a_course_copy_that_cannot_be_made_whole_runs_nothing(local_server):
    """An earlier run filled the sandbox's /tmp: the course file's copy
    cannot be written, and neither half of it nor a file of the home's of
    the same name runs."""
    teacher, area = a_course(local_server)
    put(teacher, "home", "lesson.py", "print('the home file of the same name')\n")
    put(teacher, "home", "fill.py", FILL)

    async def go():
        async with RunClient(local_server.url, teacher.http.cookies.get_dict()) as rc:
            filled = await rc.run("fill.py")
            assert filled["reason"] == "ok" and rc.output() == "No space left on device\r\n" * 2, rc.messages
            before = len(rc.messages)
            await rc.send(type="run", area=area, path="week2/lesson.py")
            return await rc.until("exit"), rc.messages[before:]
    exit_, messages = asyncio.run(go())
    out = "".join(m["data"] for m in messages if m["type"] == "output")
    assert exit_["reason"] == "error" and "course-copy-not-made-tmp-is-full" in out, messages
    assert "the home file" not in out and "Hello" not in out
    # Nor was the copy made anywhere else (the home, where the program runs from).
    assert [e["name"] for e in teacher.get("/api/files/home").json()["entries"]
            if e["name"].startswith("pyclassroom")] == []
