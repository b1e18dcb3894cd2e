"""Broken files a user hands the kit (DALL-E pickles, tokenizer folders, token stores) end in one line naming the file,
never a traceback or a signal; and the tokenizer's API edges (float frames outside [0, 1], float or bool tokens).
Stores are made with the kit's own `build_store` and the default tokenizer on tiny synthetic videos."""

import json, os, pickle, shutil, signal, struct, subprocess, sys, warnings
from vimpac.synthetic import write_video
import numpy as np
import pytest
import torch
from vimpac import store as store_mod
from vimpac.cli import pretrain_main, tokenize_main
from vimpac.store import TokenStore, build_store
from vimpac.tokenizer import VQVAE, VQVAEConfig, DalleDecoder, DalleEncoder, DalleTokenizer, load_tokenizer
from vimpac.utils import VimpacError


def one_line(msg: str, *needles):
    "A user-facing message: one line, no traceback, naming every needle."
    assert "\n" not in msg and "Traceback" not in msg, msg
    for n in needles:
        assert str(n) in msg, (n, msg)


def cli_error(capsys, fn, argv, prog):
    "Run a console script's main in-process: it must exit 2 and print one `PROG: error: ...` line on stderr."
    with pytest.raises(SystemExit) as e:
        fn(list(map(str, argv)))
    assert e.value.code == 2
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: ") and "Traceback" not in err[0], err
    return err[0]


def gradient_video(path, seconds=2, fps=10, size=64, seed=0):
    "A small synthetic H.264 video: moving gradient plus noise, written by the kit's `write_video`."
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    frames = []
    for i in range(seconds * fps):
        img = np.stack([(xx * 4 + i * 8) % 256, (yy * 4) % 256, (xx + yy + i * 4) % 256], -1).astype(np.uint8)
        frames.append(np.clip(img.astype(int) + rng.integers(0, 20, img.shape), 0, 255).astype(np.uint8))
    return write_video(np.stack(frames), path, fps=fps)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("default")


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    return [gradient_video(d / f"clip{i}.mp4", seed=i) for i in range(2)]


@pytest.fixture(scope="module")
def good_store(tmp_path_factory, videos, tok):
    out = tmp_path_factory.mktemp("stores") / "good"
    s = build_store(videos, tok, out, fps=2, frame_size=64, progress=False)
    assert len(s.stored) == 2
    return out


@pytest.fixture(scope="module")
def big_store(tmp_path_factory, videos, tok):
    """A store of several MB: `build_store` on the two videos at 8 FPS and S = 128, then (to get there without
    encoding thousands of frames) 400 more videos in the store's own format, copies of the first one under new keys,
    written with lmdb into the same shard. `TokenStore` reads all of them."""
    out = tmp_path_factory.mktemp("stores") / "big"
    build_store(videos, tok, out, fps=8, frame_size=128, progress=False)
    shard = next(out.glob("shard-*.lmdb"))
    env = store_mod.lmdb_env(shard, write=True)  # the writer's environment, still open in this process
    with env.begin(write=True) as txn:
        key = next(k[2:].decode() for k, _ in txn.cursor() if k.startswith(b"m/"))
        rec, arr = json.loads(txn.get(f"m/{key}".encode())), txn.get(f"v/{key}/1x-center".encode())
        for i in range(400):
            txn.put(f"v/copy{i:04d}/1x-center".encode(), arr)
            txn.put(f"m/copy{i:04d}".encode(), json.dumps(dict(rec, key=f"copy{i:04d}")).encode())
    env.sync()
    assert (shard / "data.mdb").stat().st_size > 3 << 20
    return out


def copy_store(src, dst):
    shutil.copytree(src, dst)
    return dst


def run_tool(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


# ---------------------------------------------------------------- DALL-E dVAE files


class _RunsCode:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_dalle_empty_pkl(tmp_path, videos, capsys):
    empty = tmp_path / "encoder.pkl"
    empty.touch()
    with pytest.raises(VimpacError) as e:
        DalleTokenizer.from_official(empty)
    one_line(str(e.value), empty, "empty file (0 bytes)")
    line = cli_error(
        capsys, tokenize_main, [videos[0], "--out", tmp_path / "s", "--tokenizer", f"dalle:{empty}"], "vimpac-tokenize"
    )
    one_line(line, empty, "empty")
    assert not (tmp_path / "s").exists()


def test_dalle_hostile_pickle_default_protocol(tmp_path, capfd):
    target = tmp_path / "pwned"
    evil = tmp_path / "encoder.pkl"
    evil.write_bytes(pickle.dumps({"model": _RunsCode(target)}))  # protocol 4/5: PROTO, then FRAME
    assert evil.read_bytes()[2] == pickle.FRAME[0]
    with warnings.catch_warnings(record=True) as caught, pytest.raises(VimpacError) as e:
        warnings.simplefilter("always")
        DalleTokenizer.from_official(evil)
    one_line(str(e.value), evil, "refused", "pickle opcode FRAME", "nothing in the file was run")
    assert "weights_only=False" not in str(e.value)
    assert not caught and capfd.readouterr().err == ""  # no torch warnings
    # the same payload in torch's own format is refused by the global it names
    torch.save({"model": _RunsCode(target)}, evil)
    with pytest.raises(VimpacError) as e:
        load_tokenizer(f"dalle:{evil}")
    one_line(str(e.value), evil, "refused", "system")
    assert not target.exists()


# ---------------------------------------------------------------- tokenizer folders


@pytest.fixture(scope="module")
def saved_tokenizer(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok") / "vq"
    torch.manual_seed(0)
    VQVAE(VQVAEConfig(vocab_size=64, channels=(8, 16, 16), code_dim=8, num_res_blocks=1)).save_pretrained(d)
    return d


def edit_config(**changes):
    def edit(d):
        cfg = json.loads((d / "config.json").read_text())
        for k, v in changes.items():
            if v is None:
                del cfg[k]
            else:
                cfg[k] = v
        (d / "config.json").write_text(json.dumps(cfg))

    return edit


def truncate_weights(d):
    w = d / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size * 2 // 3])


BROKEN_FOLDERS = {
    "invalid json": (
        lambda d: (d / "config.json").write_text('{"kind": "vimpac-vqvae",'),
        "config.json",
        "invalid JSON",
    ),
    "unknown key": (
        edit_config(vocab=64, extra=1),
        "config.json",
        "unknown key(s) extra, vocab; a vimpac VQ-VAE config has kind, vocab_size, code_dim",
    ),
    "missing field": (edit_config(channels=None), "config.json", "lacks the field(s) channels"),
    "wrong type": (
        edit_config(vocab_size="64"),
        "config.json",
        "field vocab_size is '64', expected a positive integer",
    ),
    "not an object": (lambda d: (d / "config.json").write_text("[1, 2]"), "config.json", "holds a JSON list"),
    "corrupt weights": (
        lambda d: (d / "model.safetensors").write_bytes(b"\x08" + b"\0" * 7 + b"garbage!" * 8),
        "model.safetensors",
        "not a readable safetensors file",
    ),
    "truncated weights": (truncate_weights, "model.safetensors", "truncated or corrupt?"),
    "empty weights": (
        lambda d: (d / "model.safetensors").write_bytes(b""),
        "model.safetensors",
        "not a readable safetensors file",
    ),
    "weights of another config": (edit_config(code_dim=4), "model.safetensors", "weights do not match"),
}


@pytest.mark.parametrize("case", list(BROKEN_FOLDERS))
def test_broken_tokenizer_folder(case, saved_tokenizer, tmp_path, videos, capsys):
    edit, fname, needle = BROKEN_FOLDERS[case]
    d = copy_store(saved_tokenizer, tmp_path / "tok")
    edit(d)
    with pytest.raises(VimpacError) as e:
        VQVAE.from_pretrained(d)
    one_line(str(e.value), d / fname, needle)
    with pytest.raises(VimpacError) as e:
        load_tokenizer(str(d))
    one_line(str(e.value), d / fname, needle)
    line = cli_error(capsys, tokenize_main, [videos[0], "--out", tmp_path / "s", "--tokenizer", d], "vimpac-tokenize")
    one_line(line, d / fname, needle)
    assert not (tmp_path / "s").exists()


def test_broken_tokenizer_folder_subprocess(saved_tokenizer, tmp_path, videos, bin_dir):
    d = copy_store(saved_tokenizer, tmp_path / "tok")
    edit_config(colour="red")(d)
    r = run_tool(
        [str(bin_dir / "vimpac-tokenize"), str(videos[0]), "--out", str(tmp_path / "s"), "--tokenizer", str(d)]
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("vimpac-tokenize: error: "), r.stderr
    one_line(lines[0], d / "config.json", "unknown key(s) colour")
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- token stores


def break_meta_json(s):
    (s / "meta.json").write_text('{"format": "vimpac-token-store/2", "fps": 2.0,')


def drop_meta_field(s):
    m = json.loads((s / "meta.json").read_text())
    del m["token_map"]
    (s / "meta.json").write_text(json.dumps(m))


def garbage_shard(s):
    (next(s.glob("shard-*.lmdb")) / "data.mdb").write_bytes(np.random.default_rng(1).bytes(1 << 16))


def tiny_garbage_shard(s):
    (next(s.glob("shard-*.lmdb")) / "data.mdb").write_bytes(b"junk")


BROKEN_STORES = {
    "invalid meta.json": (break_meta_json, lambda s: s / "meta.json", "invalid JSON"),
    "meta.json lacks a field": (drop_meta_field, lambda s: s / "meta.json", "lacks the field(s) token_map"),
    "garbage shard": (garbage_shard, lambda s: next(s.glob("shard-*.lmdb")).resolve(), "not an LMDB data file"),
    "tiny garbage shard": (
        tiny_garbage_shard,
        lambda s: next(s.glob("shard-*.lmdb")).resolve(),
        "not an LMDB file, or truncated",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_STORES))
def test_broken_store(case, good_store, tmp_path, capsys):
    edit, named, needle = BROKEN_STORES[case]
    s = copy_store(good_store, tmp_path / "store")
    edit(s)
    with pytest.raises(VimpacError) as e:
        TokenStore(s)
    one_line(str(e.value), named(s), needle)
    line = cli_error(
        capsys, pretrain_main, ["--store", s, "--out", tmp_path / "run", "--steps", "2"], "vimpac-pretrain"
    )
    one_line(line, named(s), needle)
    assert not (tmp_path / "run").exists()


def test_build_store_refuses_to_extend_a_broken_meta(good_store, tmp_path, videos, tok):
    s = copy_store(good_store, tmp_path / "store")
    break_meta_json(s)
    with pytest.raises(VimpacError) as e:
        build_store(videos, tok, s, fps=2, frame_size=64, progress=False)
    one_line(str(e.value), s / "meta.json", "invalid JSON")
    shutil.copy(good_store / "meta.json", s / "meta.json")
    drop_meta_field(s)
    with pytest.raises(VimpacError) as e:
        build_store(videos, tok, s, fps=2, frame_size=64, progress=False)
    one_line(str(e.value), s / "meta.json", "lacks the field(s) token_map")


def test_shard_folder_without_data(good_store, tmp_path):
    s = copy_store(good_store, tmp_path / "store")
    shard = next(s.glob("shard-*.lmdb"))
    (shard / "data.mdb").unlink()
    with pytest.raises(VimpacError) as e:
        TokenStore(s)
    one_line(str(e.value), shard.resolve(), "without its data.mdb")


READ_ALL = (
    "import sys\nfrom vimpac.store import TokenStore\nfrom vimpac.utils import VimpacError\n"
    "try:\n    s = TokenStore(sys.argv[1]); n = sum(int(s.tokens(k).sum()) for k in s.keys())\n"
    "except VimpacError as e:\n    print(e, file=sys.stderr); sys.exit(2)\nprint('read', len(s))\n"
)
RAW_LMDB_READ = (
    "import sys, lmdb\nenv = lmdb.open(sys.argv[1], readonly=True, lock=False)\n"
    "print(sum(len(v) for _, v in env.begin().cursor()))\n"
)


def truncate_shard(store, fraction):
    shard = next(store.glob("shard-*.lmdb")).resolve()
    size = (shard / "data.mdb").stat().st_size
    cut = int(size * fraction) // 4096 * 4096 + 100  # mid-page
    os.truncate(shard / "data.mdb", cut)
    return shard, size, cut


@pytest.mark.parametrize("which,fraction", [("good_store", 0.5), ("big_store", 0.6), ("big_store", 0.97)])
def test_truncated_shard_is_refused_not_sigbus(which, fraction, request, tmp_path):
    src = request.getfixturevalue(which)
    good = run_tool([sys.executable, "-c", READ_ALL, str(src)])
    assert good.returncode == 0 and good.stdout.startswith("read"), good.stderr
    s = copy_store(src, tmp_path / "store")
    shard, size, cut = truncate_shard(s, fraction)
    # without the header check, LMDB maps the short file and the process dies of SIGBUS at the first missing page
    raw = run_tool([sys.executable, "-c", RAW_LMDB_READ, str(shard)])
    assert raw.returncode == -signal.SIGBUS, (raw.returncode, raw.stderr[-300:])
    r = run_tool([sys.executable, "-c", READ_ALL, str(s)])
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    msg = r.stderr.strip()
    one_line(msg, shard, "truncated LMDB shard", f"data.mdb holds {cut} bytes", f"needs at least {size}")


def test_truncated_shard_through_the_cli(good_store, tmp_path, bin_dir):
    s = copy_store(good_store, tmp_path / "store")
    shard, size, cut = truncate_shard(s, 0.5)
    r = run_tool([str(bin_dir / "vimpac-pretrain"), "--store", str(s), "--out", str(tmp_path / "run"), "--steps", "2"])
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("vimpac-pretrain: error: "), r.stderr
    one_line(lines[0], shard, f"holds {cut} bytes, its header needs at least {size}")
    assert not (tmp_path / "run").exists()


def test_lmdb_header_of_a_real_store(big_store):
    shard = next(big_store.glob("shard-*.lmdb"))
    h = store_mod.lmdb_header(shard / "data.mdb")
    env = store_mod.lmdb_env(shard)  # this process's environment (the fixture's writer)
    info, psize = env.info(), env.stat()["psize"]
    assert (h["page_size"], h["last_page"], h["txnid"]) == (psize, info["last_pgno"], info["last_txnid"])
    assert h["needed"] == (shard / "data.mdb").stat().st_size and h["txnid"] >= 2


# ---------------------------------------------------------------- LMDB environments across fork


class _ReadInWorker(torch.utils.data.Dataset):
    "Reads video i of the store and says which process read it and the process ids of the shard's cached environments."

    def __init__(self, store):
        self.store = store

    def __len__(self):
        return len(self.store)

    def __getitem__(self, i):
        x = self.store[i]
        shard = self.store.shards[self.store._where[self.store.keys()[i]]].resolve()
        return x, os.getpid(), sorted(pid for pid, p, _ in store_mod.lmdb_environments() if p == str(shard))


def test_forked_workers_open_their_own_environment(good_store):
    store = TokenStore(good_store)  # opens the shard's environment in this process
    shard = str(store.shards[0].resolve())
    parent_env = store_mod.lmdb_env(shard)
    want = [store[i] for i in range(len(store))]
    dl = torch.utils.data.DataLoader(
        _ReadInWorker(store), batch_size=None, num_workers=2, multiprocessing_context="fork"
    )
    got = list(dl)
    assert all(torch.equal(x, w) for (x, _, _), w in zip(got, want))
    assert all(pid != os.getpid() for _, pid, _ in got)
    # a forked worker reads through an environment it opened itself (the copy of the parent's is closed there)
    assert all(pids == [pid] for _, pid, pids in got)
    assert len({pid for _, pid, _ in got}) == 2
    assert store_mod.lmdb_env(shard) is parent_env  # the parent's is untouched and still reads
    assert all(torch.equal(store[i], w) for i, w in enumerate(want))


# ---------------------------------------------------------------- tokenizer API edges


@pytest.fixture(scope="module")
def dalle():
    torch.manual_seed(0)
    return DalleTokenizer(
        DalleEncoder(n_hid=16, n_blk_per_group=1, vocab_size=64),
        DalleDecoder(n_init=8, n_hid=16, n_blk_per_group=1, vocab_size=64),
    )


@pytest.mark.parametrize("which", ["tok", "dalle"])
def test_encode_refuses_float_frames_outside_unit_range(which, request):
    t = request.getfixturevalue(which)
    frames = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    floats = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
    with pytest.raises(VimpacError) as e:
        t.encode(floats)  # 0..255 floats: garbage tokens before
    one_line(
        str(e.value), "must lie in [0, 1]", f"found values in [{floats.min():g}, {floats.max():g}]", "uint8", "255"
    )
    below = torch.full((1, 3, 8, 8), 0.5)
    below[..., 0] = -0.25
    with pytest.raises(VimpacError, match=r"\[-0.25, 0.5\]"):
        t.encode(below)
    with pytest.raises(VimpacError, match="must lie in"):
        t.encode(torch.full((1, 3, 8, 8), float("nan")))
    assert torch.equal(t.encode(floats / 255), t.encode(frames))


@pytest.mark.parametrize("which", ["tok", "dalle"])
def test_decode_refuses_float_and_bool_tokens(which, request):
    t = request.getfixturevalue(which)
    codes = torch.randint(0, 64, (2, 4, 4), generator=torch.Generator().manual_seed(0))
    for bad in (codes.float() + 0.7, codes.double(), codes > 10, codes.half()):
        with pytest.raises(VimpacError) as e:
            t.decode(bad)
        one_line(str(e.value), f"dtype {bad.dtype}", "expected integer codes", "int64")
    ref = t.decode(codes)
    for ok in (codes.to(torch.int16), codes.to(torch.int32), codes.to(torch.uint8), codes.numpy().astype(np.int16)):
        assert torch.equal(t.decode(ok), ref)


def test_store_tokens_decode_as_they_are(good_store, tok):
    "`TokenStore.tokens` gives int16; `decode` takes it as is."
    s = TokenStore(good_store, tokenizer=tok)
    x = s.tokens(s.keys()[0])
    assert x.dtype == np.int16
    assert torch.equal(tok.decode(x), tok.decode(torch.from_numpy(x).long()))


@pytest.mark.parametrize("psize", [4096, 16384, 65536])
def test_lmdb_header_page_sizes(psize, tmp_path):
    "The parser reads the page size from the header (4 KiB here; 16 KiB on Apple silicon, 64 KiB on some arm64 /"
    "ppc64le)."
    # LMDB's own layout (lmdb.h, mdb.c), written here independently of the parser: a 16-byte MDB_page header (page
    # number, pad, flags with P_META 0x08), then MDB_meta: magic 0xBEEFC0DE, version 1, address, map size, two MDB_db
    # whose first md_pad is the page size, the last used page and the transaction id
    page_head, meta = struct.Struct("=QHH4x"), struct.Struct("=II8xQI92xQQ")
    buf = bytearray(2 * psize)
    for i, (last, txnid) in enumerate([(30, 5), (33, 6)]):  # the second meta page is the newer one
        page_head.pack_into(buf, i * psize, i, 0, 0x08)
        meta.pack_into(buf, i * psize + page_head.size, 0xBEEFC0DE, 1, 1 << 30, psize, last, txnid)
    shard = tmp_path / "shard-00000-of-00001.lmdb"
    shard.mkdir()
    (shard / "data.mdb").write_bytes(bytes(buf) + bytes(32 * psize))  # exactly the 34 pages the header needs
    h = store_mod.lmdb_header(shard / "data.mdb")
    assert (h["page_size"], h["last_page"], h["txnid"], h["needed"]) == (psize, 33, 6, 34 * psize)
    store_mod.check_shard(shard)
    os.truncate(shard / "data.mdb", 34 * psize - 1)
    with pytest.raises(VimpacError) as e:
        store_mod.check_shard(shard)
    one_line(
        str(e.value),
        shard,
        f"holds {34 * psize - 1} bytes, its header needs at least {34 * psize} (34 pages of {psize} bytes)",
    )
