"""The CLI's messages in a Python caller's words.

dsp.convert_ogb, dsp.partition, dsp.generate_*, dsp.predict, ... run the CLI's own C++ commands,
whose messages name its flags. Where a message tells the caller what to pass and the flag's
Python keyword is spelt otherwise (``--overwrite``: ``overwrite=True``), a call from Python gets
the keyword: the same exception class, the phrase below replaced.
"""
import functools

from . import _dsp

# (the CLI's phrase, a Python caller's), matched exactly.
_PHRASES = (
    # An existing output directory: dsp convert, generate and partition (src/core/mapped_file.cpp,
    # src/graph/commands.cpp, src/layout/partition/partition_command.cpp).
    ("(pass --overwrite to replace it)", "(pass overwrite=True to replace it)"),
    # An existing output file of dsp predict / dsp embed (src/train/predict.cpp).
    ("choose another --out, or give --overwrite", "choose another out, or pass overwrite=True"),
)


def python_wording(message: str) -> str:
    """``message`` with the CLI's phrases in Python's words."""
    for cli, python in _PHRASES:
        message = message.replace(cli, python)
    return message


def python_keywords(fn):
    """``fn`` (a function of the extension that runs a CLI command), raising its errors in
    Python's words."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _dsp.Error as e:
            message = python_wording(str(e))
            if message == str(e):
                raise
            raise type(e)(message).with_traceback(e.__traceback__) from None
    return call
