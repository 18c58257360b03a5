"""An import that raises inside a nested import; prints the traceback, which
must have exactly the same frames with and without a tracer loaded.

The text is traceback.format_exc() with two normalisations, so that all
interpreters print the same thing: paths relative to this directory, and the
3.11+ position markers (lines made only of ^ and ~, whose presence depends on
the version) left out.  The frame list below it comes from the traceback
object itself.
"""
import os
import re
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "traceback_shape_pkgs"))


CARETS = re.compile(r"^\s*[\^~]+\s*$")


def load_outer():
    import tb_outer  # noqa: F401


def main():
    try:
        load_outer()
    except ValueError:
        text = traceback.format_exc()
        frames = traceback.extract_tb(sys.exc_info()[2])
    # Paths depend on where the checkout is (and, on 3.8, on how the script
    # was named on the command line); make them relative to this dir.
    text = re.sub(r'File "([^"]+)"',
                  lambda m: 'File "%s"' % os.path.relpath(os.path.abspath(m.group(1)), HERE),
                  text)
    lines = [line for line in text.splitlines() if not CARETS.match(line)]
    print("\n".join(lines))
    print("frames: %d" % len(frames))
    for frame in frames:
        print("  %s:%d %s" % (os.path.relpath(os.path.abspath(frame.filename), HERE), frame.lineno, frame.name))
    print("tb_outer in sys.modules: %s, tb_inner in sys.modules: %s"
          % ("tb_outer" in sys.modules, "tb_inner" in sys.modules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
