"""The server's reading of a launcher's output: text, the program's images
and the launcher's own sequences, however the bytes are cut into reads."""
from server.runs.session import EXIT, IMAGE, OscParser

LAUNCHER_EXIT = b'\x1b]7012;exit;{"code": 0}\x07'


def parse(chunks, limit=1 << 20):
    parser, items = OscParser(limit), []
    for chunk in chunks:
        items += parser.feed(chunk)
    merged = []  # adjacent text items joined, as the console shows them
    for kind, payload in items:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + payload)
        else:
            merged.append((kind, payload))
    return merged


def test_every_cut_of_the_stream_gives_the_same_items():
    stream = b"hello\x1b]7011;image;QUJD\x07 world\r\n" + LAUNCHER_EXIT
    expected = [("text", b"hello"), ("osc", IMAGE + b"QUJD"), ("text", b" world\r\n"),
                ("osc", EXIT + b'{"code": 0}')]
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == expected, cut
    assert parse([bytes([b]) for b in stream]) == expected


def test_a_sequence_a_program_never_ends_cannot_swallow_the_launchers():
    stream = b"x\x1b]7011;image;never ended, and more" + LAUNCHER_EXIT
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == [("text", b"x"), ("osc", EXIT + b'{"code": 0}')], cut


def test_an_oversized_sequence_is_dropped_and_the_next_still_seen():
    big = b"\x1b]7011;image;" + b"A" * 5000 + b"\x07"
    items = parse([big[i:i + 700] for i in range(0, len(big), 700)] + [LAUNCHER_EXIT], limit=1000)
    assert items[0][0] == "dropped" and items[0][1] >= 5000
    assert items[1:] == [("osc", EXIT + b'{"code": 0}')]


def test_an_oversized_sequence_never_ended_cannot_swallow_the_launchers_either():
    stream = b"\x1b]7011;image;" + b"A" * 5000 + LAUNCHER_EXIT
    for size in (1, 7, 700, 4096):
        pieces = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert parse(pieces, limit=1000) == [("osc", EXIT + b'{"code": 0}')], size
