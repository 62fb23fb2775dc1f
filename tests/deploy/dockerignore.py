"""The build context as Docker's legacy builder (docker.io 20.10, docker-compose 1.29) makes it
from a .dockerignore: a small re-implementation of the reading (builder/dockerignore.ReadAll)
and matching (pkg/fileutils.PatternMatcher) rules, written from their documented behaviour:

- one pattern per line, surrounding spaces trimmed; empty lines and lines starting with `#`
  are skipped; a leading `!` makes an exception (re-includes); the pattern is then cleaned
  like Go's filepath.Clean and a leading `/` dropped;
- Go filepath.Match syntax: `*` any run of non-`/` characters, `?` one non-`/` character,
  `[...]` a character class, `\\` escapes the next character; and `**` any number of
  directories (zero included), `**` at the end anything;
- a pattern that does not match a path may match one of its parent directories (compared on
  the pattern's number of path elements), which excludes everything below it;
- the last pattern that matches decides (an exception re-includes).
"""
import posixpath
import re


def read_patterns(text):
    """The patterns of a .dockerignore, in order: (pattern, is_exception)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        if exception:
            line = line[1:].strip()
            if not line:
                raise ValueError("illegal exclusion pattern: \"!\"")
        line = posixpath.normpath(line)
        if len(line) > 1 and line.startswith("/"):
            line = line[1:]
        out.append((line, exception))
    return out


def _regex(pattern):
    """fileutils' translation of one pattern to an anchored regular expression."""
    out = "^"
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        i += 1
        if ch == "*":
            if i < len(pattern) and pattern[i] == "*":
                i += 1
                if i < len(pattern) and pattern[i] == "/":
                    i += 1  # `**/` is `**`
                out += ".*" if i == len(pattern) else "(.*/)?"
            else:
                out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch in ".$":
            out += "\\" + ch
        elif ch == "\\":
            out += "\\" + pattern[i] if i < len(pattern) else "\\"
            i += 1
        else:
            out += ch
    return re.compile(out + "$")


class Matcher:
    def __init__(self, text):
        self.patterns = [(p, e, _regex(p), p.split("/")) for p, e in read_patterns(text)]

    def excluded(self, path):
        """True when `path` (relative to the context, `/`-separated) stays out of the context."""
        path = posixpath.normpath(path)
        parent = posixpath.dirname(path)
        parent_dirs = parent.split("/") if parent else []
        matched = False
        for _, exception, regex, dirs in self.patterns:
            match = bool(regex.match(path))
            if not match and parent and len(dirs) <= len(parent_dirs):
                match = bool(regex.match("/".join(parent_dirs[: len(dirs)])))
            if match:
                matched = not exception
        return matched

    def context(self, paths):
        """The paths of `paths` that the builder sends, walking directories as it does: an
        excluded directory is skipped whole unless an exception pattern starts with it."""
        kept = []
        for path in paths:
            parts = path.split("/")
            if any(self._skips_dir("/".join(parts[:n])) for n in range(1, len(parts))):
                continue
            if not self.excluded(path):
                kept.append(path)
        return kept

    def _skips_dir(self, directory):
        if not self.excluded(directory):
            return False
        return not any(e and (p + "/").startswith(directory + "/")
                       for p, e, _, _ in self.patterns)
