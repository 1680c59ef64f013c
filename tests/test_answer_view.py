"""Book text on the page as the book writes it: Gutenberg's _italics_ shown as italics, marks kept, escaped."""
from whoqa.answer_view import html_marked, html_segments, prose


def test_gutenbergs_italics_are_italics_and_nothing_else_is():
    assert prose("He read _The Times_ and _Hamlet_.") == "He read <i>The Times</i> and <i>Hamlet</i>."
    assert prose("snake_case, x_y_ and a lone _ stay") == "snake_case, x_y_ and a lone _ stay"
    assert prose("_<b>_") == "<i>&lt;b&gt;</i>"  # escaped first: the book cannot write markup
    marked = html_marked("I saw _Hamlet_ with Tom.", [(20, 23)])
    assert marked == 'I saw <i>Hamlet</i> with <mark class="m">Tom</mark>.'
    segs = [{"text": "Tom read ", "char": None}, {"text": "_Hamlet_", "char": None}, {"text": "Anna", "char": 3}]
    assert "<i>Hamlet</i>" in html_segments(segs, "b", {3}) and "_" not in html_segments(segs, "b", {3})
