"""Issue 52: the 1.5B's warm s/answer through llama-cpp-python on its installed weights or a requantisation, as the
service serves other questions (one Service, `answer` timed, the first answer excluded: it loads the model):

    .venv/bin/python docs/experiments/grounded-answers/answer_time.py --workspace HOME --book 34496feb --weights none
    .venv/bin/python docs/experiments/grounded-answers/answer_time.py --workspace HOME --book 34496feb --weights Q4_0

(HOME: a workspace with The Spoilers added, `whoqa ask ../shared/data/books/0d0bc014*.txt ...` once; run the two
arms in turn, twice, on a quiet machine.)"""
import argparse
import logging
import statistics

from whoqa.service import Service, ServiceConfig, routing

QUESTIONS = ["Where does the ship take Glenister and Dextry?", "What is the name of the mine?",
             "What does McNamara want?", "Where did Helen come from?", "How does the story end?",
             "What is Dextry's profession?", "Why does Helen go to Nome?"]

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", required=True)
ap.add_argument("--book", required=True)
ap.add_argument("--weights", default="none", help="none (as installed) or a llama.cpp type (Q4_0)")
a = ap.parse_args()
logging.disable(logging.WARNING)
weights = None if a.weights == "none" else a.weights
routing.MEASURED_LLMS = (routing.MeasuredLLM("qwen2.5-coder-1.5b", 15.61, 14.7, 5.0, weights),)
svc = Service(a.workspace, ServiceConfig(llm="qwen2.5-coder-1.5b"))
book = svc.resolve(a.book)
seconds = [svc.answer(book, q).seconds for q in QUESTIONS]
print(a.weights, "warm p50", round(statistics.median(seconds[1:]), 2), [round(s, 2) for s in seconds],
      svc.models.answering_llm("qwen2.5-coder-1.5b")[0])
