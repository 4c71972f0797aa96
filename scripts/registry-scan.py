"""Flag what the Comfy registry's security scan flags, in the files the registry ships.

Usage: uv run --frozen python scripts/registry-scan.py [--root DIR] [--allow FILE]

The registry scans every version it is sent; any finding marks the version
"Flagged" (ComfyUI Manager then keeps serving the previous one) and code
execution reachable from a workflow gets it banned. Its YARA rules are
private: the rules below are the ones publishers report and the registry
standards name (../shared/reviews/comfyui-0.38.md, "REGISTRY / MANAGER
SECURITY-SCAN RULES WE TRIP"), checked on the Python syntax tree so that,
say, ``model.eval()`` is not ``eval``. The frontend extension's JavaScript is
shipped too and is checked line by line (comments skipped) for what scanners
flag in browser code: eval and its kin, connections to other hosts, text put
into the page as HTML, and obfuscation.

The file set is the archive ``comfy node pack`` builds (comfy-cli's rules:
``comfy_llm_testworld.registry_pack``; tracked and new files alike). A hit
passes only when an entry of the allow-list (default
``scripts/registry-scan-allow.toml``) names its path, rule and a piece of its
source line, with the reason a reviewer reads; an entry that matches nothing
fails too, so the list cannot rot. Exit status: 0 clean, 1 hits not allowed
or stale entries, 2 bad usage.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from comfy_llm_testworld.registry_pack import packed_files

RULES = {
    "command-execution": "runs a program (python_command_injection_risk)",
    "pip-install": "installs packages through a subprocess (prohibited by the standards)",
    "unsafe-deserialization": "loads pickle/marshal-style data, which can run code",
    "code-execution": "eval/exec/compile/__import__ of a runtime value (prohibited)",
    "dynamic-import": "imports a module named at run time",
    "network": "opens network connections itself (python_network_operations)",
    "environment-write": "changes the process environment (python_environment_manipulation)",
    "credential-access": "reads credentials from the environment",
    "introspection": "reaches into the interpreter or native code (python_bytecode_manipulation)",
    "remote-code": "lets a model repository run its own code",
    "html-injection": "puts text into the page as HTML (innerHTML, document.write)",
    "obfuscation": "hides what the code does (atob, fromCharCode, escaped byte strings)",
}
_SCRIPT_RULES = (
    (
        "code-execution",
        re.compile(r"\beval\s*\(|\bnew\s+Function\s*\(|\bset(?:Timeout|Interval)\s*\(\s*[\"'`]"),
    ),
    ("dynamic-import", re.compile(r"\bimport\s*\(")),
    ("network", re.compile(r"https?://|\bnew\s+WebSocket\s*\(|\bXMLHttpRequest\b|\bsendBeacon\b")),
    (
        "html-injection",
        re.compile(r"\.(?:inner|outer)HTML\s*\+?=|\binsertAdjacentHTML\b|\bdocument\.write"),
    ),
    ("obfuscation", re.compile(r"\batob\s*\(|\bfromCharCode\b|(?:\\x[0-9a-fA-F]{2}){4}")),
)
_SCRIPT_SUFFIXES = (".js", ".mjs")
_COMMAND_MODULES = {"subprocess", "pty", "commands"}
_COMMAND_CALLS = re.compile(
    r"^(os\.(system|popen|spawn\w*|exec\w*|posix_spawn\w*|fork\w*)"
    r"|pty\.spawn|asyncio\.create_subprocess_\w+)$"
)
_DESERIALIZERS = {"pickle", "cPickle", "_pickle", "marshal", "dill", "shelve", "cloudpickle"}
_NETWORK_MODULES = {
    "socket",
    "http.client",
    "urllib.request",
    "requests",
    "httpx",
    "aiohttp",
    "websocket",
    "websockets",
    "ftplib",
    "smtplib",
    "telnetlib",
    "paramiko",
}
_CODE_BUILTINS = {"eval", "exec", "compile", "__import__", "execfile"}
_CREDENTIAL = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|ACCESS_KEY)")


@dataclass(frozen=True)
class Hit:
    """One flagged line."""

    path: str
    line: int
    rule: str
    text: str


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _safe_load(name: str, call: ast.Call) -> bool:
    """Whether a load call cannot run code.

    torch.load(weights_only=True), yaml.load(Loader=...) and numpy.load without
    allow_pickle=True.
    """
    options = {k.arg: getattr(k.value, "value", k.value) for k in call.keywords}
    if name == "torch.load":
        return options.get("weights_only") is True
    if name == "yaml.load":
        return "Loader" in options
    if name in {"numpy.load", "np.load"}:
        return options.get("allow_pickle", False) is False
    return False


def _is_environ(node: ast.AST) -> bool:
    return _dotted(node) in {"os.environ", "environ"}


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.environ_reads: list[int] = []
        self.credential_names: list[int] = []
        self.pip_strings: list[int] = []

    def _add(self, node: ast.AST, rule: str) -> None:
        self.found.append((getattr(node, "lineno", 0), rule))

    def _module(self, node: ast.AST, name: str) -> None:
        root = name.split(".", maxsplit=1)[0]
        if root in _COMMAND_MODULES:
            self._add(node, "command-execution")
        if root in _DESERIALIZERS:
            self._add(node, "unsafe-deserialization")
        if name in _NETWORK_MODULES or root in _NETWORK_MODULES:
            self._add(node, "network")
        if root == "ctypes":
            self._add(node, "introspection")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            self._module(node, node.module)
            for alias in node.names:
                self._module(node, f"{node.module}.{alias.name}")

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if isinstance(node.func, ast.Name) and node.func.id in _CODE_BUILTINS:
            self._add(node, "code-execution")
        elif _COMMAND_CALLS.match(name):
            self._add(node, "command-execution")
        elif name.endswith(("import_module",)) and not (
            node.args and isinstance(node.args[0], ast.Constant)
        ):
            self._add(node, "dynamic-import")
        elif name in {"torch.load", "yaml.load", "yaml.unsafe_load", "numpy.load", "np.load"}:
            if not _safe_load(name, node):
                self._add(node, "unsafe-deserialization")
        elif name.endswith(".connect"):
            self._add(node, "network")
        elif name in {"os.putenv", "os.unsetenv"} or (
            isinstance(node.func, ast.Attribute)
            and _is_environ(node.func.value)
            and node.func.attr in {"update", "setdefault", "pop", "clear", "__setitem__"}
        ):
            self._add(node, "environment-write")
        if name in {"os.getenv", "os.environ.get", "environ.get"}:
            self.environ_reads.append(node.lineno)
        for keyword in node.keywords:
            if keyword.arg == "trust_remote_code" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                self._add(node, "remote-code")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_environ(node.value):
            if isinstance(node.ctx, ast.Store | ast.Del):
                self._add(node, "environment-write")
            else:
                self.environ_reads.append(node.lineno)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _dotted(node) == "sys.modules" or node.attr in {"__code__", "f_globals", "f_locals"}:
            self._add(node, "introspection")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if _CREDENTIAL.search(node.value) and node.value.isupper():
                self.credential_names.append(node.lineno)
            if re.search(r"\bpip\b[\w\s-]*\binstall\b", node.value):
                self.pip_strings.append(node.lineno)


def scan_source(path: str, source: str) -> list[Hit]:
    """The hits in one Python file (``path`` is only reported)."""
    tree = ast.parse(source, filename=path)
    visitor = _Visitor()
    visitor.visit(tree)
    found = list(visitor.found)
    if visitor.credential_names:  # an environment read in a file naming HF_TOKEN & co.
        found += [(line, "credential-access") for line in visitor.environ_reads]
    if any(rule == "command-execution" for _, rule in found):
        found += [(line, "pip-install") for line in visitor.pip_strings]
        for node in ast.walk(tree):  # ["pip", "install", ...] / [python, "-m", "pip", "install"]
            if isinstance(node, ast.List | ast.Tuple):
                words = {getattr(item, "value", None) for item in node.elts}
                if {"pip", "install"} <= words:
                    found.append((node.lineno, "pip-install"))
    lines = source.splitlines()
    return sorted(
        {
            Hit(path, line, rule, lines[line - 1].strip() if 0 < line <= len(lines) else "")
            for line, rule in found
        },
        key=lambda hit: (hit.path, hit.line, hit.rule),
    )


def scan_script(path: str, source: str) -> list[Hit]:
    """The hits in one shipped JavaScript file (comments are skipped)."""
    hits = []
    in_comment = False
    for number, line in enumerate(source.splitlines(), start=1):
        code = line.strip()
        if in_comment or code.startswith("/*"):
            in_comment = "*/" not in code
            continue
        code = re.sub(r"(^|\s)//.*$", "", code)
        hits += [
            Hit(path, number, rule, code) for rule, pattern in _SCRIPT_RULES if pattern.search(code)
        ]
    return hits


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry: a hit in ``path`` of ``rule`` whose line holds ``line``."""

    path: str
    rule: str
    line: str
    reason: str


def load_allow_list(path: Path) -> list[Allowed]:
    """The entries of an allow-list file (``[[allow]]`` tables; a reason is required)."""
    if not path.is_file():
        return []
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("allow", [])
    allowed = []
    for index, entry in enumerate(entries):
        missing = {"path", "rule", "line", "reason"} - set(entry)
        if missing or entry["rule"] not in RULES or len(str(entry["reason"]).strip()) < 20:
            raise ValueError(
                f"{path} entry {index + 1}: needs path, rule (one of {sorted(RULES)}), the "
                f"line's text and a reason a reviewer can read (missing {sorted(missing)})"
            )
        allowed.append(Allowed(entry["path"], entry["rule"], entry["line"], entry["reason"]))
    return allowed


def scan(
    root: Path, allow: list[Allowed]
) -> tuple[list[tuple[Hit, Allowed | None]], list[Allowed]]:
    """Every hit in the shipped Python and JavaScript files, its entry, and unused entries."""
    results: list[tuple[Hit, Allowed | None]] = []
    used: set[Allowed] = set()
    for name in packed_files(root, untracked=True):
        if name.endswith(".py"):
            scanner = scan_source
        elif name.endswith(_SCRIPT_SUFFIXES):
            scanner = scan_script
        else:
            continue
        for hit in scanner(name, (root / name).read_text(encoding="utf-8")):
            entry = next(
                (
                    a
                    for a in allow
                    if a.path == hit.path and a.rule == hit.rule and a.line in hit.text
                ),
                None,
            )
            if entry is not None:
                used.add(entry)
            results.append((hit, entry))
    return results, [entry for entry in allow if entry not in used]


def main(argv: list[str] | None = None) -> int:
    """Scan, print every hit and its verdict, return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    parser.add_argument(
        "--root", type=Path, default=here, help="the repository (default: this one)"
    )
    parser.add_argument("--allow", type=Path, default=None, help="the allow-list TOML file")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    allow_path = args.allow or root / "scripts" / "registry-scan-allow.toml"
    try:
        allow = load_allow_list(allow_path)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        print(f"registry-scan: {error}", file=sys.stderr)
        return 2
    results, stale = scan(root, allow)
    refused = [hit for hit, entry in results if entry is None]
    for hit, entry in results:
        verdict = f"allowed: {entry.reason}" if entry else f"NOT ALLOWED: {RULES[hit.rule]}"
        print(f"{hit.path}:{hit.line}: {hit.rule}: {hit.text}\n    {verdict}")
    for entry in stale:
        print(f"STALE allow-list entry (matches nothing): {entry.path} {entry.rule} {entry.line!r}")
    shipped = packed_files(root, untracked=True)
    python = sum(1 for name in shipped if name.endswith(".py"))
    scripts = sum(1 for name in shipped if name.endswith(_SCRIPT_SUFFIXES))
    print(
        f"registry-scan: {python} shipped Python files, {scripts} JavaScript, {len(results)} hits, "
        f"{len(results) - len(refused)} allowed, {len(refused)} not allowed, {len(stale)} stale"
    )
    return 1 if refused or stale else 0


if __name__ == "__main__":
    sys.exit(main())
