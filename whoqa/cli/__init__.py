"""`whoqa`'s commands, one module per group (the top-level cli.py assembles them): each command calls one whoqa
function, its options built from that function's config dataclass (whoqa.cli.util.option)."""
