"""Odd but real videos, made here by Debian's FFmpeg (and PyAV): what is stored must be what the video shows.

Each clip is small (160x120 or less, a few seconds). Its frames carry a white block in the top-left corner (to see
the orientation) and a grey bar along the bottom whose length is (i + 1) / n of the width in frame i of n (to see
which source frame a sample took). Tests that need the `ffmpeg` program skip, saying so, when it is missing."""

import json, math, os, shutil, struct, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import torch
from vimpac.utils import VimpacError
from vimpac.video import read_video, read_views, decode_frames, sample_frames, VIEW_SETS, sample_videos
from vimpac.store import build_store, TokenStore, video_key
from vimpac.tokenizer import VQVAE, VQVAEConfig

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(
    FFMPEG is None, reason="the ffmpeg program is not installed (apt-get install ffmpeg; .ci/run installs it)"
)


def ffmpeg(*args):
    subprocess.run([FFMPEG, *"-hide_banner -loglevel error -y".split(), *map(str, args)], check=True, timeout=60)


def source(n, rate=10, size="160x120", extra=""):
    "lavfi input of n frames at `rate`: white top-left block, bar of (i + 1) / n of the width at the bottom."
    geq = f"geq=lum='if(gt(Y\\,H-9)\\,if(lt(X\\,W*(N+1)/{n})\\,128\\,16)\\,if(lt(X\\,W/3)*lt(Y\\,H/3)\\,235\\,16))'"
    return ["-f", "lavfi", "-i", f"color=c=black:s={size}:r={rate}:d={n / rate},format=gray,{geq}{extra}"]


H264 = "-c:v libx264 -pix_fmt yuv420p -g 10 -qp 0".split()  # lossless: the bars read exactly


def make(path, n=30, rate=10, codec=H264, post=(), size="160x120", extra=""):
    ffmpeg(*source(n, rate, size, extra), *codec, *post, path)
    return path


def frame_index(frames, n):
    "Which of the n source frames each decoded frame is, from its bar (frames at native size)."
    return (np.round((frames[:, -4:, :, 0] > 72).mean((1, 2)) * n) - 1).astype(int).tolist()


def decode(path, **kw):
    info = {}
    return read_video(path, fps=2, frame_size=None, crop=None, info=info, **kw), info


@pytest.fixture(scope="module")
def tok():
    "A tiny untrained VQ-VAE (the store does not care how good it is), run on one thread: its calls are small."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield VQVAE(VQVAEConfig(vocab_size=64, channels=(8, 16, 16), code_dim=8, num_res_blocks=1)).eval()
    torch.set_num_threads(threads)


# --- fps --------------------------------------------------------------------------------------------------------

BAD_FPS = [0, -2.0, float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("fps", BAD_FPS)
def test_bad_fps_refused_by_every_reader(fps):
    clip = sample_videos()[2]
    for call in (
        lambda: read_video(clip, fps=fps),
        lambda: decode_frames(clip, fps=fps),
        lambda: read_views(clip, fps=fps),
        lambda: next(sample_frames(clip, fps=fps)),
    ):
        with pytest.raises(VimpacError, match=r"^fps: must be a positive, finite number of frames per second, got "):
            call()


def test_bad_arguments_write_nothing(tok, tmp_path):
    clip = sample_videos()[2]
    out = tmp_path / "store"
    bad = [dict(fps=f) for f in BAD_FPS] + [
        dict(frame_size=0),
        dict(frame_size=-64),
        dict(frame_size=60),
        dict(frame_size=64.0),
        dict(batch_size=0),
        dict(batch_size=-1),
        dict(workers=-1),
        dict(views="sideways"),
        dict(views=[]),
        dict(num_shards=0),
        dict(num_shards=2, shard_index=2),
        dict(shard_index=-1),
    ]
    names = "fps frame_size batch_size workers view num_shards shard_index".split()
    for kw in bad:
        args = dict(fps=2, frame_size=64) | kw
        with pytest.raises(VimpacError) as e:
            build_store([clip], tok, out, progress=False, **args)
        msg = str(e.value)
        assert "\n" not in msg and any(n in msg.split(":")[0] for n in names), (kw, msg)
        assert not out.exists(), kw
    # a bad option on an existing store leaves it as it was (meta.json untouched, still readable)
    build_store([clip], tok, out, fps=2, frame_size=64, progress=False)
    meta = (out / "meta.json").read_bytes()
    for kw in bad:
        with pytest.raises(VimpacError):
            build_store([clip], tok, out, progress=False, **(dict(fps=2, frame_size=64) | kw))
    assert (out / "meta.json").read_bytes() == meta and len(TokenStore(out)) == 1
    # a file where the store folder should be
    (tmp_path / "afile").write_text("x")
    with pytest.raises(VimpacError, match="afile: is a file"):
        build_store([clip], tok, tmp_path / "afile", progress=False)


def test_cli_fps_inf_exits_2_without_writing(tmp_path, capsys):
    "Today's hang: --fps inf spun forever in the sampling loop. Now one line, exit 2, nothing written."
    from vimpac.cli import tokenize_main

    out = tmp_path / "store"
    with pytest.raises(SystemExit) as e:
        tokenize_main([str(sample_videos()[2]), "--out", str(out), *"--fps inf --frame-size 64".split()])
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert e.value.code == 2 and len(err) == 1 and "fps" in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


# --- timing -----------------------------------------------------------------------------------------------------


@needs_ffmpeg
def test_raw_h264_elementary_stream(tmp_path):
    "No container, no timestamps: frames are timed by their index at the stream's rate (was: 1 frame stored)."
    raw = make(tmp_path / "clip.h264", n=75, rate=25, post=["-f", "h264"])
    frames, info = decode(raw)
    assert info["duration"] == pytest.approx(3.0, abs=1e-6) and len(frames) == 6
    assert frame_index(frames, 75) == [0, 12, 25, 37, 50, 62]  # nearest frames to 0, 0.5, ..., 2.5 s at 25 FPS


@needs_ffmpeg
@pytest.mark.parametrize("ext", ["mkv", "mp4"])
def test_variable_frame_rate_freeze(tmp_path, ext):
    "10 FPS for 2 s, a 3 s freeze, 10 FPS for 2 s: a frame for every instant, the frozen one held (was: T = 9)."
    vfr = make(
        tmp_path / f"vfr.{ext}",
        n=40,
        post=["-vf", "setpts='round((N+30*gte(N,20))/10/TB)'", "-fps_mode", "passthrough"],
    )
    frames, info = decode(vfr)
    assert info["duration"] == pytest.approx(7.0, abs=1e-3) and len(frames) == round(7.0 * 2)
    assert frame_index(frames, 40) == [0, 5, 10, 15] + [19] * 6 + [20, 25, 30, 35]


@needs_ffmpeg
@pytest.mark.parametrize("start,ext", [(0.54, "mkv"), (100.0, "mkv"), (100.0, "ts")])
def test_stream_not_starting_at_zero(tmp_path, start, ext):
    "Sampling and duration relative to the stream's first frame (was: from absolute 0; duration 103 s)."
    clip = make(tmp_path / f"late.{ext}", n=30, post=["-output_ts_offset", start])
    frames, info = decode(clip)
    assert frame_index(frames, 30) == [0, 5, 10, 15, 20, 25]
    assert info["duration"] == pytest.approx(3.0, abs=1e-3) and info["start"] >= start


@needs_ffmpeg
def test_spliced_transport_streams(tmp_path):
    "Two 3 s transport streams joined with cat: the timeline jumps back; both halves are kept (was: the second lost)."
    part = make(tmp_path / "part.ts", n=30)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(part.read_bytes() * 2)
    frames, info = decode(joined)
    assert frame_index(frames, 30) == [0, 5, 10, 15, 20, 25] * 2 and info["duration"] == pytest.approx(6.0, abs=1e-3)


@needs_ffmpeg
def test_header_duration_that_lies(tmp_path, tok):
    "A Matroska header claiming 1 h for a 5 s clip: T and the recorded duration come from the decoded stream."
    clip = make(tmp_path / "lie.mkv", n=50)
    data = bytearray(clip.read_bytes())
    i = data.find(b"\x44\x89")  # Segment Info > Duration (EBML float, milliseconds)
    size = data[i + 2] & 0x7F
    fmt = ">d" if size == 8 else ">f"
    assert struct.unpack(fmt, data[i + 3 : i + 3 + size])[0] == pytest.approx(5000)
    data[i + 3 : i + 3 + size] = struct.pack(fmt, 3_600_000.0)
    clip.write_bytes(bytes(data))
    import av

    with av.open(str(clip)) as c:
        assert c.duration / 1e6 == pytest.approx(3600)  # the header does lie
    frames, info = decode(clip)
    assert len(frames) == 10 and info["duration"] == pytest.approx(5.0, abs=1e-3)
    build_store([clip], tok, tmp_path / "store", fps=2, frame_size=64, progress=False)
    store = TokenStore(tmp_path / "store")
    rec = store.record(store.keys()[0])
    assert rec["frames"] == 10 and rec["duration"] == pytest.approx(5.0, abs=1e-3)


# --- orientation ------------------------------------------------------------------------------------------------


def ffmpeg_first_frame_gray(path):
    "The first frame as FFmpeg's own pipeline shows it (autorotation on): gray (H, W), read from a PGM image."
    pgm = subprocess.run(
        [FFMPEG, "-loglevel", "error", "-i", str(path), *"-frames:v 1 -f image2pipe -c:v pgm -".split()],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    magic, w, h, maxval, pixels = pgm.split(maxsplit=4)
    assert magic == b"P5" and maxval == b"255"
    return np.frombuffer(pixels[: int(w) * int(h)], np.uint8).reshape(int(h), int(w))


@needs_ffmpeg
@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_phone_rotation(tmp_path, rotate, tok):
    "A rotation tag (display matrix): frames in display orientation, as FFmpeg's player shows them (was: sideways)."
    base = make(tmp_path / "landscape.mp4", n=10)
    phone = tmp_path / f"phone{rotate}.mp4"
    ffmpeg("-i", base, "-c", "copy", "-metadata:s:v:0", f"rotate={rotate}", phone)
    shown = ffmpeg_first_frame_gray(phone)
    frames, info = decode(phone)
    assert frames.shape[1:3] == shown.shape, (frames.shape, shown.shape)
    ours = frames[0].mean(-1)
    assert np.abs(ours - shown).mean() < 4  # the same picture, up to the two libraries' colour conversions
    # the white block is in the corner the player shows it in, and nowhere else
    corner = {0: (0, 0), 1: (1, 0), 2: (1, 1), 3: (0, 1)}[(info["rotation"] // 90) % 4]  # (bottom?, right?)
    H, W = ours.shape
    block = (
        ours[H - 20 :, :20]
        if corner == (1, 0)
        else ours[H - 20 :, W - 20 :]
        if corner == (1, 1)
        else ours[:20, W - 20 :]
    )
    assert block.mean() > 200 and ours[:20, :20].mean() < 60
    portrait = rotate % 180 == 90
    assert (frames.shape[1] > frames.shape[2]) == portrait
    # resized on the displayed size: the shorter side is the displayed width of a portrait video
    assert read_video(phone, fps=2, frame_size=32, crop=None).shape[1:3] == ((43, 32) if portrait else (32, 43))
    # and the store tokenizes what is shown
    build_store([phone], tok, tmp_path / "store", fps=2, frame_size=32, progress=False)
    store = TokenStore(tmp_path / "store")
    key = store.keys()[0]
    assert store.record(key)["rotation"] == info["rotation"]
    # the same codes, up to the rare nearest-code tie that another batch's float sums flip (a frame stored turned by
    # 90 degrees matches fewer)
    shown = read_video(phone, fps=2, frame_size=32)
    same = store.tokens(key) == tok.encode(shown).numpy()
    turned = store.tokens(key) == tok.encode(np.ascontiguousarray(np.rot90(shown, axes=(1, 2)))).numpy()
    assert same.mean() > 0.95 and turned.mean() < same.mean(), (same.mean(), turned.mean())


# --- damaged files: one policy ----------------------------------------------------------------------------------


def _faststart_clip(tmp_path):
    "6 s at 10 FPS with temporal noise (so its bytes spread over the frames), the index (moov) at the front."
    return make(
        tmp_path / "whole.mp4",
        n=60,
        extra=",noise=alls=20:allf=t",
        codec="-c:v libx264 -pix_fmt yuv420p -g 5 -crf 18".split(),
        post=["-movflags", "+faststart"],
    )


@needs_ffmpeg
def test_truncated_and_corrupted_keep_prefix_and_report_partial(tmp_path, tok):
    whole = _faststart_clip(tmp_path).read_bytes()
    data = tmp_path / "data"
    data.mkdir()
    (data / "cut.mp4").write_bytes(whole[: int(len(whole) * 0.3)])  # a download cut at 30%
    import av

    with av.open(str(tmp_path / "whole.mp4")) as c:
        packets = [(p.pos, p.size) for p in c.demux(video=0) if p.size]
    first, (mid, mid_size) = packets[0], packets[len(packets) // 2]
    corrupt = bytearray(whole)  # garbage over frame 30 from its NAL length field on: the decoder gives up there
    corrupt[mid : mid + mid_size] = bytes((i * 37 + 211) % 256 for i in range(mid_size))
    (data / "corrupt.mp4").write_bytes(bytes(corrupt))
    (data / "nothing.mp4").write_bytes(whole[: first[0] + 10])  # the index, but not one whole frame
    for name in ("cut.mp4", "corrupt.mp4"):
        frames, info = decode(data / name)
        assert info["partial"] and info["expected"] == 12 and 0 < len(frames) < 12, (name, info)
        assert frame_index(frames, 60) == [5 * i for i in range(len(frames))]  # the prefix, timed right
    with pytest.raises(VimpacError, match="nothing.mp4: no frame could be decoded"):
        decode(data / "nothing.mp4")
    s = build_store(data, tok, tmp_path / "store", fps=2, frame_size=64, progress=False)
    assert (len(s.stored), len(s.failed), len(s.partial)) == (2, 1, 2)
    assert "2 stored, 0 skipped (already stored), 1 failed, 2 partial" in s.headline()
    store = TokenStore(tmp_path / "store")
    for p in s.partial:
        assert 0 < p["frames"] < p["expected"] == 12 and f"{p['frames']} of 12 frames stored" in p["reason"]
        rec = store.record(p["key"])
        assert rec["frames"] == p["frames"] and rec["partial"]["expected"] == 12
        assert store.tokens(p["key"]).shape[0] == p["frames"]
    fails = {Path(f["path"]).name: f for f in store.failures()}
    assert set(fails) == {"cut.mp4", "corrupt.mp4", "nothing.mp4"}
    assert fails["cut.mp4"]["partial"] and not fails["nothing.mp4"].get("partial")
    # the command line says so: one warning line per partial video, exit status 0 (the video is stored)
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "vimpac-tokenize"),
            str(data / "cut.mp4"),
            "--out",
            str(tmp_path / "cli"),
            "--frame-size",
            "64",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "1 stored, 0 skipped (already stored), 0 failed, 1 partial" in r.stdout
    warn = [l for l in r.stderr.splitlines() if l.startswith("vimpac-tokenize: warning:")]
    assert len(warn) == 1 and "cut.mp4: partial:" in warn[0] and "of 12 frames stored" in warn[0]


# --- containers and folder scans --------------------------------------------------------------------------------

CONTAINERS = {  # file name: encoder arguments (25 FPS, 2 s: every container gets T = 4 at 2 FPS)
    "a.ts": H264,
    "b.m2ts": H264,
    "c.MTS": H264 + ["-f", "mpegts"],
    "d.3gp": H264,
    "e.flv": H264,
    "f.mkv": H264,
    "g.webm": "-c:v libvpx -b:v 200k".split(),
    "h.wmv": ["-c:v", "wmv2"],
    "i.ogv": ["-c:v", "libtheora"],
    "j.mxf": "-c:v mpeg2video -pix_fmt yuv420p".split(),
    "k.vob": "-c:v mpeg2video -f vob".split(),
    "l.y4m": ["-pix_fmt", "yuv420p"],
    "m.avi": ["-c:v", "mpeg4"],
    "n.mov": H264,
    "o.mpg": ["-c:v", "mpeg1video"],
    "p.M4V": H264 + ["-f", "mp4"],
    "q.h264": H264 + ["-f", "h264"],
    "r.asf": ["-c:v", "wmv2"],
    "s.mts": H264 + ["-f", "mpegts"],
}


@needs_ffmpeg
def test_every_container_is_picked_up_and_skips_are_counted(tmp_path, tok):
    root = tmp_path / "mixed"
    (root / "sub").mkdir(parents=True)
    for i, (name, codec) in enumerate(CONTAINERS.items()):
        make((root / "sub" if i % 2 else root) / name, n=50, rate=25, codec=codec, size="64x48")
    for name in "a.txt b.txt sub/c.txt x.json sub/y.json cover.jpg".split():
        (root / name).write_text("{}")
    s = build_store(root, tok, tmp_path / "store", fps=2, frame_size=32, progress=False)
    assert (len(s.stored), len(s.failed), len(s.partial)) == (len(CONTAINERS), 0, 0), str(s)
    assert s.scan_skipped == {".txt": 3, ".json": 2, ".jpg": 1}
    assert "6 files skipped by the folder scan: .txt x 3, .json x 2, .jpg x 1" in s.headline()
    store = TokenStore(tmp_path / "store")
    lengths = {store.record(k)["name"].split("/")[-1]: store.record(k)["frames"] for k in store.keys()}
    assert lengths == {n: 4 for n in CONTAINERS}, lengths


# --- keys -------------------------------------------------------------------------------------------------------


def test_keys_survive_a_moved_dataset(tmp_path, tok):
    clips = sample_videos()
    a = tmp_path / "disk1" / "howto"
    (a / "cooking").mkdir(parents=True)
    shutil.copy(clips[2], a / "cooking" / "carphone.mp4")
    shutil.copy(clips[0], a / "bunny.mp4")
    (a / "list.txt").write_text("cooking/carphone.mp4\n# a comment\n./bunny.mp4\n")
    out = tmp_path / "store"
    s1 = build_store(a, tok, out, fps=1, frame_size=32, progress=False)
    assert len(s1.stored) == 2
    keys = TokenStore(out).keys()
    assert sorted(keys) == sorted([video_key("bunny.mp4"), video_key("cooking/carphone.mp4")])
    b = tmp_path / "disk2" / "mounted" / "howto"
    shutil.copytree(a, b)
    (b / "absolute.lst").write_text(
        f"{b / 'bunny.mp4'}\n{b / 'cooking' / 'carphone.mp4'}\n"
    )  # inside the list's folder
    for inputs in ([b], [b / "list.txt"], [b / "absolute.lst"]):
        s = build_store(inputs, tok, out, fps=1, frame_size=32, progress=False)
        assert (len(s.stored), len(s.skipped), len(s.failed)) == (0, 2, 0), str(s)
    # a file given directly is keyed by its name
    s = build_store([b / "bunny.mp4"], tok, out, fps=1, frame_size=32, progress=False)
    assert s.skipped == [video_key("bunny.mp4")]
    # the same relative name but another file: not stored over the first, and said so
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(clips[1], other / "bunny.mp4")
    s = build_store([other / "bunny.mp4"], tok, out, fps=1, frame_size=32, progress=False)
    assert not s.stored and len(s.failed) == 1 and "already holds another file" in s.failed[0]["reason"]
    assert len(TokenStore(out)) == 2
    # two different files with one name in a run: refused before anything is written
    with pytest.raises(VimpacError, match="two different videos named 'bunny.mp4'"):
        build_store([a / "bunny.mp4", other / "bunny.mp4"], tok, tmp_path / "new", progress=False)
    assert not (tmp_path / "new").exists()


# --- chunked decoding, worker processes -------------------------------------------------------------------------


def test_chunks_and_workers_store_the_same_tokens(tmp_path, tok):
    "Chunks smaller than a video (batch_size 3), 0 or 2 worker processes: the tokens of every view are the same."
    clips = [sample_videos()[2], tmp_path / "copy.mp4"]  # 4 s at 176x144, twice: one video per worker
    shutil.copy(clips[0], clips[1])
    stores = {}
    for workers in (0, 2):
        out = tmp_path / f"w{workers}"
        s = build_store(
            clips, tok, out, fps=2, frame_size=32, views="all", batch_size=3, workers=workers, progress=False
        )
        assert len(s.stored) == 2
        stores[workers] = TokenStore(out)
    for clip in clips:
        key = video_key(clip.name)
        views = read_views(clip, fps=2, frame_size=32, views=VIEW_SETS["all"])
        for v in VIEW_SETS["all"]:
            want = tok.encode(views[v]).numpy()
            assert np.array_equal(stores[0].tokens(key, v), want) and np.array_equal(stores[2].tokens(key, v), want)


SPAWN = """
import multiprocessing as mp, sys, torch
from vimpac.store import build_store, TokenStore
from vimpac.tokenizer import VQVAE, VQVAEConfig
from vimpac.video import sample_videos
if __name__ == "__main__":
    mp.set_start_method("spawn")
    torch.manual_seed(0)
    tok = VQVAE(VQVAEConfig(vocab_size=64, channels=(8, 16, 16), code_dim=8, num_res_blocks=1)).eval()
    s = build_store([sample_videos()[2]], tok, sys.argv[1], fps=2, frame_size=32, workers=1, progress=False)
    print(len(s.stored), len(s.failed), TokenStore(sys.argv[1]).lengths)
"""


def test_workers_under_the_spawn_start_method(tmp_path):
    "No lambda in the loader: worker processes also start where they are spawned (macOS, Windows)."
    script = tmp_path / "spawn_store.py"
    script.write_text(SPAWN)
    r = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[0] == "1 0 [8]"


def test_memory_is_bounded_by_a_chunk(tmp_path):
    "sample_frames yields chunks of at most `chunk` frames and never holds the whole video."
    clip = sample_videos()[1]
    info = {}
    sizes = [len(c[0]) for c in sample_frames(clip, fps=8, sizes=(32, 40), chunk=7, info=info)]
    assert max(sizes) == 7 and sum(sizes) == info["frames"] == 80 and math.ceil(80 / 7) == len(sizes)
    assert json.dumps(info)  # the report is plain data (it crosses process boundaries)
