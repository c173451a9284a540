"""Safe Exam Browser (server/seb.py): an exam that requires it takes,
from its students while it runs for them, only requests whose
X-SafeExamBrowser-ConfigKeyHash is SHA-256(the request's own URL + the
Config Key the teacher gave): right, wrong, replayed from another URL, and
missing, on every path of the exam (its folder's files, Run and Check on
the run socket, signals, the exam, the IDE page). A real server, real
PostgreSQL."""
import asyncio
import hashlib

from loadtest.run_client import RunClient
from tests.conftest import PUBLIC_URL, People
from tests.test_exams import exam, room, save

KEY = "3f" * 32  # a Config Key, as SEB's configuration tool shows it
OTHER_KEY = "a1" * 32
SAID = "This exam must be taken in Safe Exam Browser: open the exam's .seb file your teacher gave you"


def seb(url, key=KEY):
    """The header SEB sends for `url` with `key`."""
    return {"X-SafeExamBrowser-ConfigKeyHash": hashlib.sha256((url + key).encode()).hexdigest()}


def refused(r):
    return r.status_code == 403 and r.json()["error"] == "seb_required" and r.json()["message"].startswith(SAID)


class SebRunClient(RunClient):
    """An IDE's socket whose upgrade carries `headers` (as SEB's would)."""

    def __init__(self, url, cookies, headers):
        super().__init__(url, cookies)
        self.extra = headers

    async def open(self):
        from loadtest.run_client import ws_session
        self.http = self._own_http = ws_session(self.timeout)
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        self.ws = await self.http.ws_connect(self.url, origin=self.base_url, headers={"Cookie": cookie, **self.extra})
        return self


def on_socket(server, client, headers, **message):
    """Send `message` on a run socket opened with `headers`: the last message (exit, done check or error)."""
    async def go():
        async with SebRunClient(server.url, client.http.cookies.get_dict(), headers) as rc:
            await rc.send(**message)
            while True:
                got = await rc.receive(120)
                if got["type"] in ("exit", "error") or got["type"] == "check" and got.get("state") == "done":
                    return got
    return asyncio.run(go())


def test_an_exam_that_requires_safe_exam_browser_takes_only_requests_that_prove_it(server, people):
    number, teacher, ann, ben = room(server, people)
    r = teacher.request("POST", f"/api/classes/{number}/exams",
                        json={"title": "x", "exercises": ["average"], "minutes": 5, "seb_config_key": "not-a-key"})
    assert (r.status_code, r.json()["error"]) == (400, "bad_seb_config_key") and "64" in r.json()["message"]
    made = exam(teacher, number, minutes=30, seb_config_key=KEY.upper())  # as the tool may show it
    assert made["safe_exam_browser"] is True and KEY not in str(made).lower()
    spec = f"exam/{made['id']}"
    files = f"/api/files/{spec}/average"
    url = server.url + files

    assert refused(ann.request("GET", files))  # no header
    assert refused(ann.request("GET", files, headers=seb(url, OTHER_KEY)))  # another configuration's
    assert refused(ann.request("GET", files, headers=seb(server.url + f"/api/files/{spec}")))  # replayed
    assert refused(ann.request("GET", files, headers={"X-SafeExamBrowser-ConfigKeyHash": "0" * 64}))
    listed = ann.request("GET", files, headers=seb(url))
    assert listed.status_code == 200 and [e["name"] for e in listed.json()["entries"]] == ["average.py"], listed.text
    saved = f"/api/files/{spec}/answer.py"
    assert refused(save(ann, spec, "answer.py", "print(1)"))
    r = ann.request("PUT", saved, data=b"print(1)", headers={"If-Match": "*", **seb(server.url + saved)})
    assert r.status_code == 200, r.text

    about = f"/api/exams/{made['id']}"
    assert refused(ann.request("GET", about))
    mine = ann.request("GET", about, headers=seb(server.url + about))
    assert mine.status_code == 200 and mine.json()["exam"]["safe_exam_browser"] is True
    assert KEY not in mine.text.lower() and KEY not in ann.request("GET", "/api/exam").text.lower()
    signals = f"/api/exams/{made['id']}/signals"
    assert refused(ann.request("POST", signals, json={"kind": "focus_lost"}))
    assert ann.request("POST", signals, json={"kind": "focus_lost"}, headers=seb(server.url + signals)).status_code == 201

    page = ann.request("GET", "/ide")
    assert page.status_code == 403 and SAID in page.text and "<script" not in page.text
    assert ann.request("GET", "/ide", headers=seb(server.url + "/ide")).status_code == 200

    socket = server.url.replace("http://", "ws://") + "/ws/run"
    said = on_socket(server, ann, {}, type="run", path="answer.py", area=spec)
    assert (said["type"], said["error"]) == ("error", "seb_required"), said
    said = on_socket(server, ann, seb(server.url + "/ide"), type="run", path="answer.py", area=spec)  # another URL's
    assert (said["type"], said["error"]) == ("error", "seb_required"), said
    ended = on_socket(server, ann, seb(socket), type="run", path="answer.py", area=spec)
    assert ended["type"] == "exit" and ended["reason"] == "ok", ended
    said = on_socket(server, ann, {}, type="check", **{"class": number}, exercise="average", area=spec)
    assert (said["type"], said["error"]) == ("error", "seb_required"), said
    done = on_socket(server, ann, seb(socket), type="check", **{"class": number}, exercise="average", area=spec)
    assert done["type"] == "check" and done["state"] == "done", done

    # Ben is held to it too; the teacher, reading a student's folder, is not; another class's page opens as ever.
    assert refused(ben.request("GET", f"/api/files/{spec}"))
    assert teacher.request("GET", f"/api/files/exams/{made['id']}/{ann.username}/answer.py").status_code == 200
    assert people.student("out").request("GET", "/ide").status_code == 200


def test_behind_a_proxy_the_hash_is_of_the_public_address_the_browser_asked_for(public_server):
    people = People(public_server)
    number, teacher, ann, _ = room(public_server, people)
    made = exam(teacher, number, minutes=30, seb_config_key=KEY)
    files = f"/api/files/exam/{made['id']}"
    assert ann.request("GET", files, headers=seb(PUBLIC_URL + files)).status_code == 200
    assert refused(ann.request("GET", files, headers=seb(public_server.url + files)))  # not what SEB saw
