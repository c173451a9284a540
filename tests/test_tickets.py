"""The tickets a runner takes and the proof it answers with
(server/runs/sandbox/tickets.py), attacked in-process: forged, foreign,
expired, replayed, tampered with, or not a ticket at all."""
import pytest
from hypothesis import given, strategies as st

from server.runs.sandbox.tickets import (TICKET_SECONDS, Refused, Tickets, _unb64, issue, proof, proof_holds,
                                         runner_key)

SECRET = "the-web-tiers-runner-secret-" + "y" * 12
NOW = 1_800_000_000.0


def refused(tickets, ticket, now=NOW):
    with pytest.raises(Refused) as e:
        tickets.accept(ticket, now)
    return str(e.value)


def test_a_runners_key_is_its_own_and_one_way():
    assert runner_key(SECRET, "r1") != runner_key(SECRET, "r2")
    assert runner_key(SECRET, "r1") != runner_key(SECRET + "!", "r1")
    assert len(runner_key(SECRET, "r1")) == 32
    for bad in ("", "R1", "r 1", "../r1", "-r1", "r" * 64, "r1\n"):
        with pytest.raises(ValueError):
            runner_key(SECRET, bad)


def test_a_ticket_is_taken_once_by_its_runner_before_it_expires():
    key = runner_key(SECRET, "r1")
    tickets = Tickets(key, "r1")
    ticket, sandbox = issue(key, "r1", now=NOW)
    assert tickets.accept(ticket, NOW + 1) == sandbox
    assert "replay" in refused(tickets, ticket, NOW + 2)
    assert "expired" in refused(tickets, issue(key, "r1", now=NOW - TICKET_SECONDS - 60)[0])
    assert "too late" in refused(tickets, issue(key, "r1", now=NOW + 3600)[0])
    assert "for runner 'r2'" in refused(tickets, issue(key, "r2", now=NOW)[0])
    assert "not signed with this runner's key" in refused(tickets, issue(runner_key(SECRET, "r2"), "r1", now=NOW)[0])
    # Each ticket is its own: a second one for the same runner is taken.
    second, other = issue(key, "r1", now=NOW)
    assert tickets.accept(second, NOW) == other != sandbox


def test_the_ids_seen_are_forgotten_once_their_tickets_could_not_be_taken_anyway():
    key = runner_key(SECRET, "r1")
    tickets = Tickets(key, "r1")
    for i in range(50):
        tickets.accept(issue(key, "r1", now=NOW + i)[0], NOW + i)
    tickets.accept(issue(key, "r1", now=NOW + 1000)[0], NOW + 1000)
    assert len(tickets.seen) == 1


def test_only_the_runners_key_proves_it_for_that_sandbox():
    key = runner_key(SECRET, "r1")
    answer = proof(key, "sandbox-a")
    assert proof_holds(key, "sandbox-a", answer)
    assert not proof_holds(key, "sandbox-b", answer)
    assert not proof_holds(runner_key(SECRET, "r2"), "sandbox-a", answer)
    for wrong in (None, 42, "", answer[:-1], answer + "A", ["x"]):
        assert not proof_holds(key, "sandbox-a", wrong)


@given(st.one_of(st.text(max_size=600), st.binary(max_size=100), st.integers(), st.none(),
                 st.lists(st.text(max_size=5), max_size=3)))
def test_anything_that_is_not_a_ticket_is_refused_and_nothing_else_is_raised(junk):
    tickets = Tickets(runner_key(SECRET, "r1"), "r1")
    with pytest.raises(Refused):
        tickets.accept(junk, NOW)


@given(position=st.integers(min_value=0), replacement=st.characters(codec="ascii"))
def test_a_ticket_changed_anywhere_is_refused(position, replacement):
    key = runner_key(SECRET, "r1")
    ticket, _ = issue(key, "r1", now=NOW)
    position %= len(ticket)
    changed = ticket[:position] + replacement + ticket[position + 1:]
    tickets = Tickets(key, "r1")
    if changed == ticket:
        return
    try:
        tickets.accept(changed, NOW)
    except Refused:
        return
    # Taken only if it is the same ticket: the last character of a base64 part
    # has bits no byte uses, and those may differ.
    assert [_unb64(part) for part in changed.split(".")] == [_unb64(part) for part in ticket.split(".")]


def test_a_heartbeat_is_read_only_with_its_runners_key_and_in_time():
    from server.runs.sandbox.tickets import heartbeat, read_heartbeat
    now_ns = int(NOW * 1e9)
    token = heartbeat(runner_key(SECRET, "r1"), "r1", "ws://10.0.1.5:8790", 8, 3, now_ns)
    assert read_heartbeat(SECRET, token, NOW) == {"runner": "r1", "address": "ws://10.0.1.5:8790", "capacity": 8,
                                                  "busy": 3, "sent": now_ns, "fleet": None}
    wrong = (heartbeat(runner_key(SECRET + "!", "r1"), "r1", "ws://x:1", 8, 3, now_ns),  # another secret's key
             heartbeat(runner_key(SECRET, "r2"), "r1", "ws://x:1", 8, 3, now_ns),  # r2's key, naming r1
             issue(runner_key(SECRET, "r1"), "r1", NOW)[0],  # a ticket, though signed with r1's key
             heartbeat(runner_key(SECRET, "r1"), "r1", "ws://x:1", 8, 3, now_ns - 31 * 10**9),  # too old
             heartbeat(runner_key(SECRET, "r1"), "r1", "ws://x:1", 8, 3, now_ns + 31 * 10**9),  # from too far ahead
             heartbeat(runner_key(SECRET, "r1"), "r1", "http://x:1", 8, 3, now_ns),  # not a runner's address
             heartbeat(runner_key(SECRET, "r1"), "r1", "ws://x:1\n", 8, 3, now_ns),  # nor with a line after it
             heartbeat(runner_key(SECRET, "r1"), "r1", "ws://x:1", -1, 3, now_ns))
    for token in wrong:
        with pytest.raises(Refused):
            read_heartbeat(SECRET, token, NOW)


@given(st.one_of(st.text(max_size=600), st.binary(max_size=50).map(lambda b: b.hex() + "." + b.hex()),
                 st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=3)))
def test_anything_but_a_heartbeat_is_refused_in_words(token):
    from server.runs.sandbox.tickets import read_heartbeat
    with pytest.raises(Refused):
        read_heartbeat(SECRET, token, NOW)


def test_a_fleet_key_enrolls_only_its_members_and_is_no_runners_key():
    from server.runs.sandbox.tickets import heartbeat, read_heartbeat
    now_ns = int(NOW * 1e9)
    fleet = bytes(range(32))
    fleets = {"ecs": fleet}
    enrolled = read_heartbeat(SECRET, heartbeat(fleet, "ecs-1a2b", "ws://x:1", 8, 0, now_ns, fleet="ecs"), NOW,
                              fleets)
    assert enrolled["fleet"] == "ecs" and enrolled["runner"] == "ecs-1a2b"
    for token in (heartbeat(fleet, "ecs-1a2b", "ws://x:1", 8, 0, now_ns),  # a fleet's key speaks for no runner
                  heartbeat(fleet, "web-1", "ws://x:1", 8, 0, now_ns, fleet="ecs"),  # not a member's name
                  heartbeat(fleet, "web-1", "ws://x:1", 8, 0, now_ns, fleet="web"),  # a fleet it does not take
                  heartbeat(runner_key(SECRET, "ecs-1a2b"), "ecs-1a2b", "ws://x:1", 8, 0, now_ns, fleet="ecs")):
        with pytest.raises(Refused):
            read_heartbeat(SECRET, token, NOW, fleets)
