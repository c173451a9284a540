"""Scale-out as an operator runs it on one VM: two server instances with two
workers each, sharing one database and one storage root, behind Debian's
nginx with the repository's deploy/nginx.conf. A student's session, saves
and runs work whichever instance and worker answers."""
import asyncio
import os
import time

from tests.helpers import create_user
from tests.nginx_proxy import nginx_in_front
from loadtest.run_client import RunClient
from loadtest.client import Client

GUARD = 10  # seconds: a session still served after this is a failure


def test_session_saves_and_runs_work_across_instances_behind_nginx(start_server, fresh_db, data_dir, nginx_prefix):
    storage = os.path.join(data_dir, "shared-storage")
    common = dict(processes=2, STORAGE_ROOT=storage, TRUST_PROXY=1, SANDBOX="local")
    a = start_server(data_dir=os.path.join(data_dir, "a"), **common)
    b = start_server(data_dir=os.path.join(data_dir, "b"), **common)
    create_user(fresh_db, "ada", "ada-password")
    ports = [int(s.url.rsplit(":", 1)[1]) for s in (a, b)]
    with nginx_in_front(nginx_prefix, ports) as port:
        url = f"http://127.0.0.1:{port}"
        ada = Client(url)
        ada.login_ok("ada", "ada-password")
        answered_by = set()
        etag = None
        for i in range(24):
            # A new connection each time, so nginx and the kernel spread them.
            ada.http.close()
            r = ada.request("PUT", "/api/files/home/counter.py", data=f"n = {i}\n".encode(),
                            headers={"If-Match": f'"{etag}"'} if etag else {})
            assert r.status_code == 200, r.text
            etag = r.json()["etag"]
            answered_by.add(int(r.headers["X-Worker-Pid"]))
            got = ada.get("/api/files/home/counter.py")
            assert got.json()["content"] == f"n = {i}\n"
            answered_by.add(int(got.headers["X-Worker-Pid"]))
        instances = {name for name, s in (("a", a), ("b", b)) if answered_by & set(s.pids)}
        assert instances == {"a", "b"}, f"answers from {answered_by}, a={a.pids}, b={b.pids}"

        ada.request("PUT", "/api/files/home/greet.py", headers={"If-Match": "*"},
                    data=b"name = input('name? ')\nprint('hello', name)\n")

        async def run_twice():
            exits = []
            for _ in range(4):
                async with RunClient(url, ada.http.cookies.get_dict()) as rc:
                    exits.append((await rc.run("greet.py", ["Ada"]), rc.output("stdout")))
            return exits
        for exit_, out in asyncio.run(run_twice()):
            assert exit_["reason"] == "ok" and out.endswith("hello Ada\r\n"), out
        # Logging out through one instance ends the session on the other too.
        cookies = ada.http.cookies.get_dict()
        for server in (a, b):
            assert server.client().get("/api/me", cookies=cookies).status_code == 200
        assert ada.post("/api/logout").status_code == 200
        # The other instance hears of it through the database (LISTEN/NOTIFY), a
        # moment later: asked until it refuses, within a hang guard.
        for server in (a, b):
            deadline = time.monotonic() + GUARD
            while (status := server.client().get("/api/me", cookies=cookies).status_code) == 200 \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert status == 401
