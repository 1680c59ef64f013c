"""Coreferee (R. P. Hudson, MIT) as a peer of the engine's resolver, on the same documents under the same scorer.

Coreferee ships its rules and training code; its English model is a download from GitHub, so here it is trained with
its own training loop on LitBank's training folds (every gold chain, all entity types, marked as its LitBank loader
marks them) and judged by data_prep.litbank on the held-out documents: the 5 document folds every resolver is
compared on. It resolves over one spaCy Doc per document (its chains cross sentences), built on LitBank's own tokens.
Our mentions for it are spaCy's PERSON entities and personal pronouns, each in the coreferee chain that holds its
head token (a chain of its own otherwise): the same scope as the engine's PER names and pronouns.
"""
from __future__ import annotations

import contextlib
import io
import itertools

from data_prep.litbank import GoldDoc, Span, doc_folds, parse_docs, predicted
from data_prep.narrativeqa import DataError
from thinc.api import fix_random_seed
from whoqa.core.progress import bar
from importlib.metadata import version

PERSONAL_PRONOUNS = frozenset(
    "i me my mine myself you your yours yourself yourselves he him his himself she her hers herself we us our ours "
    "ourselves they them their theirs themselves thee thou thy thine ye".split())


def require() -> None:
    """coreferee importable (it registers token._.coref_chains), or one line saying how to install it."""
    try:
        import coreferee  # noqa: F401
    except ImportError as e:
        raise DataError(f"coreferee is not installed ({e}): pip install 'whoqa[coref]' (bash install.sh does)") from None


def whole_doc(nlp, gold: GoldDoc):
    """The document as one parsed Doc on LitBank's tokens, its sentence breaks kept."""
    from spacy.tokens import Doc
    words = [w for s in gold.sentences for w in s]
    starts = [k == 0 for s in gold.sentences for k in range(len(s))]
    return nlp(Doc(nlp.vocab, words=words, sent_starts=starts))


def mark_gold(doc, chains: list[set[Span]], rules) -> None:
    """Coreferee's training marks: each gold mention's neighbour in its chain, where coreferee's rules offer it as a
    candidate, is flagged true_in_training (what its LitBankANNLoader does, on our inclusive token spans)."""
    from coreferee.data_model import Mention
    rules.initialize(doc)
    for chain in chains:
        spans = sorted((doc[s:e + 1] for s, e in chain if e >= s), key=lambda sp: sp.start)
        spans = [sp for sp in spans if rules.is_independent_noun(sp.root) or rules.is_potential_anaphor(sp.root)]
        for i, sp in enumerate(spans):
            siblings = sp.root._.coref_chains.temp_dependent_siblings
            mention = Mention(sp.root, len(siblings) > 0 and siblings[-1].i < sp.end)
            for other in spans[max(0, i - 1):i] + spans[i + 1:i + 2]:
                found = [m for m in getattr(other.root._.coref_chains, "temp_potential_referreds", None) or []
                         if m == mention]
                for m in found:
                    m.true_in_training = True
                if found:
                    break


def _forget_feature_maps(doc) -> None:
    """Coreferee caches each token's features under the feature table in force; a new fold brings a new table."""
    for token in doc:
        holder = token._.coref_chains
        if hasattr(holder, "temp_feature_map"):
            del holder.temp_feature_map
        for m in getattr(holder, "temp_potential_referreds", None) or []:
            if hasattr(m, "temp_feature_map"):
                del m.temp_feature_map


def train(nlp, rules, docs: list, seed: int = 13, dev_every: int = 5):
    """(feature table, thinc model) learned on the marked docs with coreferee's own loop: epochs until the accuracy
    on every dev_every-th document (held out of the gradient) falls."""
    require()
    from coreferee.tendencies import ENSEMBLE_SIZE, DocumentPairInfo, TendenciesAnalyzer, generate_feature_table
    from coreferee.training.train import TrainingManager
    if len(docs) < 2:
        raise DataError(f"coreferee needs at least 2 training documents per fold (one to fit, one to stop on); got "
                        f"{len(docs)}: give it more LitBank documents (or fewer folds)")
    fix_random_seed(seed)
    for doc in docs:
        _forget_feature_maps(doc)
    dev, fit = docs[::dev_every], [d for k, d in enumerate(docs) if k % dev_every]
    table = generate_feature_table(docs, nlp)
    analyzer = TendenciesAnalyzer(rules, nlp, table)
    pairs = [p for p in (DocumentPairInfo.from_doc(d, analyzer, ENSEMBLE_SIZE, is_train=True) for d in fit)
             if len(p.candidates.dataXd) > 0]
    if not pairs:
        raise DataError("coreferee found no training pair in the training documents: are they LitBank coref files?")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # it prints each epoch
        model = TrainingManager.train_thinc_model(None, pairs, dev, nlp, nlp, table)  # (its self is unused)
    return table, model


def predicted_mentions(doc) -> dict[Span, tuple[int, str]]:
    """PERSON entities (PROP) and personal pronouns (PRON), clustered by coreferee's chains."""
    chain_of: dict[int, int] = {}
    for chain in doc._.coref_chains:
        for m in chain:
            if len(m.token_indexes) == 1:  # (coordinations, "Tom and Mary", are no one character)
                chain_of.setdefault(m.token_indexes[0], chain.index)
    out: dict[Span, tuple[int, str]] = {}
    alone = itertools.count(1_000_001)  # ids of mentions in no chain
    for ent in doc.ents:
        if ent.label_ == "PERSON":
            out[(ent.start, ent.end - 1)] = (chain_of[ent.root.i] if ent.root.i in chain_of else next(alone), "PROP")
    for t in doc:
        if t.pos_ == "PRON" and t.lower_ in PERSONAL_PRONOUNS:
            out[(t.i, t.i)] = (chain_of[t.i] if t.i in chain_of else next(alone), "PRON")
    return out


def on_engine_names(engine_pred: dict[Span, tuple[int, str]], doc, fallback: bool) -> dict[Span, tuple[int, str]]:
    """The engine's names and characters, with each of its pronouns given the character of the nearest named mention
    before it (else after it) in the pronoun's coreferee chain: coreferee's pronoun decisions judged alone, on the
    engine's name clusters. A pronoun coreferee links to no name keeps the engine's character (fallback) or none."""
    name_at = {i: c for (s, e), (c, kind) in engine_pred.items() if kind == "PROP" for i in range(s, e + 1)}
    linked: dict[int, int] = {}
    for chain in doc._.coref_chains:
        named = [(m.root_index, name_at[m.root_index]) for m in chain if m.root_index in name_at]
        for m in chain:
            i = m.root_index
            if len(m.token_indexes) != 1 or i in name_at or not named:
                continue
            before = [c for j, c in named if j < i]
            linked.setdefault(i, before[-1] if before else named[0][1])
    out, alone = {}, itertools.count(1_000_001)
    for span, (c, kind) in engine_pred.items():
        if kind == "PRON" and span[0] in linked:
            c = linked[span[0]]
        elif kind == "PRON" and not fallback:
            c = next(alone)
        out[span] = (c, kind)
    return out


MENTIONS = ("coreferee", "engine-names", "engine-names+rules")  # whose mentions and which pronouns coreferee decides


def cross_validated_predictions(engine, docs: list[GoldDoc], parsed, folds: int = 5, seed: int = 13,
                                mentions: str = "coreferee") -> tuple[list, dict]:
    """Each document's mentions as coreferee resolves them after training on the other folds' documents (the
    engine's spaCy model; coreferee reads whole documents). mentions: coreferee (spaCy's PERSON entities and
    pronouns in coreferee's chains), engine-names (the engine's names and characters, every pronoun by coreferee) or
    engine-names+rules (as engine-names, the engine's rules deciding the pronouns coreferee links to no name)."""
    if mentions not in MENTIONS:
        raise ValueError(f"mentions={mentions!r}: use one of {MENTIONS}")
    if mentions != "coreferee" and parsed is None:
        parsed = parse_docs(engine, docs)
    require()
    from coreferee.annotation import Annotator
    from coreferee.rules import RulesAnalyzerFactory
    nlp = engine.nlp
    rules = RulesAnalyzerFactory().get_rules_analyzer(nlp)
    marked = []
    for gold in bar(docs, desc="coreferee: parse", unit="doc"):
        doc = whole_doc(nlp, gold)
        mark_gold(doc, gold.chains, rules)
        marked.append(doc)
    preds: list = [None] * len(docs)
    for held in bar([h for h in doc_folds(len(docs), folds) if h], desc="coreferee: folds", unit="fold"):
        table, model = train(nlp, rules, [marked[j] for j in range(len(docs)) if j not in held], seed)
        annotator = Annotator(nlp, nlp, table, model)
        for j in held:
            doc = whole_doc(nlp, docs[j])  # unmarked: nothing of the gold reaches the annotator
            annotator.annotate(doc)
            if mentions == "coreferee":
                preds[j] = predicted_mentions(doc)
            else:
                preds[j] = on_engine_names(predicted(engine, parsed[j]), doc, fallback=mentions.endswith("rules"))
    return preds, {"resolver": f"coreferee {version('coreferee')} trained on LitBank ({folds}-fold cross-validated "
                               f"by document, seed {seed}); mentions: {mentions}"}
