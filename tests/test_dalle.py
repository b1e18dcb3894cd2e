"""Parity of the kit's DALL-E dVAE with the official `dall_e` 0.1 implementation (installed as a dev-only reference,
without its torchvision pin), and refusal of hostile pickles."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from vimpac.tokenizer import DalleTokenizer, load_tokenizer
from vimpac.utils import VimpacError
from vimpac.video import read_video, sample_videos
from helpers import RunsCode

dall_e = pytest.importorskip("dall_e")


def official_files(tmp_path, n_hid=64, blocks=1, vocab=512, n_init=32, seed=0):
    torch.manual_seed(seed)
    enc = dall_e.Encoder(n_hid=n_hid, n_blk_per_group=blocks, vocab_size=vocab)
    dec = dall_e.Decoder(n_init=n_init, n_hid=n_hid, n_blk_per_group=blocks, vocab_size=vocab)
    for m in (enc, dec):  # official biases start at zero: give them values so that they are checked too
        for name, p in m.named_parameters():
            if name.endswith(".b"):
                p.data.normal_(std=0.1)
    # saved the way the released files were: the whole module pickled by torch.save
    torch.save(enc, tmp_path / "encoder.pkl")
    torch.save(dec, tmp_path / "decoder.pkl")
    return enc.eval(), dec.eval()


@pytest.mark.parametrize("n_hid,blocks,vocab", [(64, 1, 512), (64, 2, 1024)])
def test_parity_with_official(tmp_path, n_hid, blocks, vocab):
    enc, dec = official_files(tmp_path, n_hid, blocks, vocab)
    ours = DalleTokenizer.from_official(tmp_path / "encoder.pkl", tmp_path / "decoder.pkl")
    assert (ours.encoder.n_hid, ours.encoder.n_blk_per_group, ours.vocab_size, ours.encoder.group_count) == (
        n_hid,
        blocks,
        vocab,
        4,
    )
    frames = read_video(sample_videos()[0], fps=2, frame_size=64)[:3]
    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        ref_logits = enc(dall_e.map_pixels(x))
        ref_tokens = ref_logits.argmax(1)
        one_hot = F.one_hot(ref_tokens, num_classes=vocab).permute(0, 3, 1, 2).float()
        ref_frames = dall_e.unmap_pixels(torch.sigmoid(dec(one_hot)[:, :3]))
        ours_logits = ours.encoder(dall_e.map_pixels(x))
    assert torch.equal(ours_logits, ref_logits)
    assert torch.equal(ours.encode(frames), ref_tokens)
    assert torch.allclose(ours.decode(ref_tokens), ref_frames, atol=1e-6, rtol=0)
    # the name form of load_tokenizer gives the same tokenizer
    again = load_tokenizer(f"dalle:{tmp_path / 'encoder.pkl'},{tmp_path / 'decoder.pkl'}")
    assert again.identity == ours.identity and torch.equal(again.encode(frames), ref_tokens)


def test_encoder_only_and_swapped_files(tmp_path):
    official_files(tmp_path)
    tok = DalleTokenizer.from_official(tmp_path / "encoder.pkl")
    assert tok.encode(np.zeros((1, 16, 16, 3), np.uint8)).shape == (1, 2, 2)
    with pytest.raises(VimpacError, match="without decoder.pkl"):
        tok.decode(torch.zeros(1, 2, 2, dtype=torch.long))
    with pytest.raises(VimpacError, match="holds a dall_e Decoder"):
        DalleTokenizer.from_official(tmp_path / "decoder.pkl")


def test_hostile_pickles_are_refused(tmp_path):
    target = tmp_path / "pwned"
    # a module pickle with a payload hidden inside
    enc, _ = official_files(tmp_path)
    enc.payload = RunsCode(target)
    torch.save(enc, tmp_path / "evil_encoder.pkl")
    with pytest.raises(VimpacError, match=r"refused to load.*system"):
        DalleTokenizer.from_official(tmp_path / "evil_encoder.pkl")
    # a plain pickle that calls eval
    torch.save({"x": RunsCode(target)}, tmp_path / "evil2.pkl")
    with pytest.raises(VimpacError, match="refused to load"):
        DalleTokenizer.from_official(tmp_path / "evil2.pkl")
    # not a pickle at all, and a state dict instead of a module
    (tmp_path / "text.pkl").write_text("hello")
    with pytest.raises(VimpacError, match="text.pkl: not a readable torch file"):
        DalleTokenizer.from_official(tmp_path / "text.pkl")
    torch.save(enc.state_dict(), tmp_path / "sd.pkl")
    with pytest.raises(VimpacError, match="expected a pickled dall_e Encoder"):
        DalleTokenizer.from_official(tmp_path / "sd.pkl")
    assert not target.exists()
