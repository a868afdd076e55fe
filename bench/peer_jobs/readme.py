"""bench/README.md's generated sections: peers.py and scaling.py each own the text between two markers."""


def write_section(readme, begin, end, block):
    """Replace what stands between ``begin`` and ``end`` in ``readme`` with ``block`` (appended, markers and
    all, when the markers are not there yet)."""
    text = readme.read_text()
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        text = before + begin + "\n" + block + "\n" + end + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + begin + "\n" + block + "\n" + end + "\n"
    readme.write_text(text)
