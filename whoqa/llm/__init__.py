"""The local LLMs: which ones whoqa knows (registry: files, licence, runtime, measurements, roles), where their files
are (models), where they run (runtimes: llama-cpp-python, gpt4all's llama.cpp, transformers), the prompt and its few
shots (prompt, render), the reader that writes answers and scores names (reader), grounding an answer in the passages
(grounding), and runs over a workspace's questions (runs)."""
