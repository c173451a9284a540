"""The server's reading of a launcher's output: its frames, and the images
inside a program's output however the bytes are cut."""
import asyncio
import struct

import pytest
from hypothesis import given, strategies as st

from server.runs.protocol import HEADER, LAUNCHER_KINDS, BadFrame, FrameKinds, ImageParser, frame, read_frame

IMAGE = b"\x1b]7011;image;QUJD\x07"


def parse(chunks, limit=1 << 20):
    parser, items = ImageParser(limit), []
    for chunk in chunks:
        items += parser.feed(chunk)
    items += parser.finish()
    merged = []  # adjacent text items joined, as the console shows them
    for kind, payload in items:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + payload)
        else:
            merged.append((kind, payload))
    return merged


def test_every_cut_of_the_stream_gives_the_same_items():
    stream = b"hello" + IMAGE + b" world\r\n\x1b]70 not an image\r\n"
    expected = [("text", b"hello"), ("image", b"QUJD"), ("text", b" world\r\n\x1b]70 not an image\r\n")]
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == expected, cut
    assert parse([bytes([b]) for b in stream]) == expected


def test_a_sequence_a_program_never_ends_is_dropped_at_the_next_or_at_the_end():
    stream = b"x\x1b]7011;image;never ended, and more" + IMAGE + b"after"
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == [("text", b"x"), ("image", b"QUJD"), ("text", b"after")], cut
    assert parse([b"y\x1b]7011;image;never ended"]) == [("text", b"y")]


def test_an_oversized_image_is_dropped_and_the_next_still_seen():
    big = b"\x1b]7011;image;" + b"A" * 5000 + b"\x07"
    items = parse([big[i:i + 700] for i in range(0, len(big), 700)] + [IMAGE], limit=1000)
    assert items[0][0] == "dropped" and items[0][1] >= 5000
    assert items[1:] == [("image", b"QUJD")]


def test_the_mark_input_leaves_after_its_prompt_is_cut_out_however_the_bytes_are_cut():
    stream = b"Your name? \x1b]7011;input\x07"
    expected = [("text", b"Your name? "), ("input", b"")]
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == expected, cut
    assert parse([b"\x1b]7011;inputs\x07ok"]) == [("text", b"ok")]  # only the exact mark


def test_the_mark_input_writes_before_its_prompt_is_cut_out_however_the_bytes_are_cut():
    stream = b"Hi\r\n\x1b]7011;prompt\x07Your name? \x1b]7011;input\x07"
    expected = [("text", b"Hi\r\n"), ("prompt", b""), ("text", b"Your name? "), ("input", b"")]
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == expected, cut
    assert parse([b"\x1b]7011;prompts\x07ok"]) == [("text", b"ok")]


def read_all(data, cuts=()):
    """Every frame read from `data` fed in pieces (cut at `cuts`)."""
    async def go():
        stream = asyncio.StreamReader()
        bounds = [0, *cuts, len(data)]
        for a, b in zip(bounds, bounds[1:]):
            stream.feed_data(data[a:b])
        stream.feed_eof()
        frames = []
        while True:
            item = await read_frame(stream)
            if item is None:
                return frames
            frames.append(item)
    return asyncio.run(go())


def test_frames_are_read_whole_however_the_bytes_arrive():
    data = frame(b"R") + frame(b"o", b"hello \x1b]7012;exit;{}\x07") + frame(b"X", b'{"code": 0}')
    expected = [(b"R", b""), (b"o", b"hello \x1b]7012;exit;{}\x07"), (b"X", b'{"code": 0}')]
    for cut in range(len(data) + 1):
        assert read_all(data, [cut]) == expected, cut


@pytest.mark.parametrize("data", [
    b"Z" + struct.pack(">I", 0),  # a kind the launcher never sends
    b"o" + struct.pack(">I", 64 << 20),  # far larger than the launcher ever sends
    frame(b"o", b"cut short")[:-3],  # the output ended inside a frame
    b"o\x00",
])
def test_a_broken_launcher_is_noticed(data):
    with pytest.raises(BadFrame):
        read_all(data)



@given(st.lists(st.tuples(st.sampled_from(sorted(LAUNCHER_KINDS)), st.binary(max_size=40)), max_size=8),
       st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_a_relay_sees_each_frame_in_the_chunk_that_completes_its_header(frames, cuts):
    # A runner relays the launcher's output a chunk at a time, and sends a
    # run's final counts before the chunk in which its `X` can first be read.
    data, ends = b"", []
    for kind, payload in frames:
        ends.append((len(data) + HEADER - 1, kind))  # where its header's last byte is
        data += frame(kind, payload)
    bounds = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    kinds = FrameKinds()
    for start, end in zip(bounds, bounds[1:]):
        assert kinds.begun(data[start:end]) == {kind for at, kind in ends if start <= at < end}
