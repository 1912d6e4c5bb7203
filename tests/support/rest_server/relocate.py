"""Relocate Jackson into the package the Iceberg runtime jar was built against.

`iceberg-spark-runtime` refers to Jackson as `org.apache.iceberg.shaded.com.fasterxml.jackson`
(Iceberg's build relocates it) but the jar in `snowpark-connect-deps-iceberg` leaves Jackson
out. `relocate_jars` does what the build's shading step does, on the stock Jackson jars: every
class moves to the relocated package (its entry name, and each constant-pool UTF8 entry that
names a Jackson class: internal names `com/fasterxml/jackson/...`, descriptors and signatures
`Lcom/fasterxml/jackson/...;`, and dotted strings such as `Class.forName` arguments), and the
ServiceLoader files under META-INF/services are renamed and rewritten to match.

Class files are rewritten by parsing the constant pool (JVMS 4.4): only CONSTANT_Utf8 entries
change, each with its 2-byte length updated; every other entry and everything after the pool
(which refers to the pool by index only) is copied byte for byte.
"""

from __future__ import annotations

import re
import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

OLD = "com/fasterxml/jackson"
NEW = "org/apache/iceberg/shaded/com/fasterxml/jackson"

# Either separator, the same one throughout; not when already relocated (idempotent).
_PATTERN = re.compile(rb"(?<!shaded[/.])com([/.])fasterxml\1jackson")
_MAGIC = 0xCAFEBABE

# Sizes of the constant-pool entries after their tag byte (JVMS table 4.4-B), except Utf8.
_FIXED_SIZES = {
    3: 4,  # Integer
    4: 4,  # Float
    5: 8,  # Long (takes two slots)
    6: 8,  # Double (takes two slots)
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}
_UTF8 = 1


def relocate_bytes(data: bytes) -> bytes:
    """`com/fasterxml/jackson` -> the relocated name, in slash or dotted form."""

    def replace(match: re.Match[bytes]) -> bytes:
        separator = match.group(1)
        return NEW.encode().replace(b"/", separator)

    return _PATTERN.sub(replace, data)


def relocate_name(name: str) -> str:
    return relocate_bytes(name.encode()).decode()


def relocate_class(data: bytes) -> bytes:
    """The class file with every constant-pool Utf8 entry relocated."""
    if len(data) < 10 or struct.unpack_from(">I", data, 0)[0] != _MAGIC:
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos = 10
    index = 1
    while index < count:
        tag = data[pos]
        if tag == _UTF8:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            # Modified UTF-8 encodes every non-ASCII character in bytes >= 0x80, so an ASCII
            # pattern can only match whole ASCII characters: bytes-level replacement is safe.
            value = relocate_bytes(data[pos + 3 : pos + 3 + length])
            if len(value) > 0xFFFF:
                raise ValueError(f"constant #{index} is too long once relocated")
            out += struct.pack(">BH", tag, len(value)) + value
            pos += 3 + length
            index += 1
        elif tag in _FIXED_SIZES:
            size = _FIXED_SIZES[tag]
            out += data[pos : pos + 1 + size]
            pos += 1 + size
            index += 2 if tag in (5, 6) else 1
        else:
            raise ValueError(f"unknown constant-pool tag {tag} at offset {pos}")
    out += data[pos:]
    return bytes(out)


def relocate_jars(jars: Iterable[Path], target: Path) -> None:
    """Write one jar holding the relocated classes and services of `jars` to `target`.

    Left out: each jar's manifest (a new one says Multi-Release, for the Java-11+ variants under
    META-INF/versions), module descriptors (they would describe the old packages) and the
    Maven metadata. Licence and notice files are kept, named after their jar.
    """
    classes: dict[str, bytes] = {}
    services: dict[str, list[bytes]] = {}
    other: dict[str, bytes] = {}
    for jar in jars:
        stem = jar.name.removesuffix(".jar")
        with zipfile.ZipFile(jar) as zin:
            for info in zin.infolist():
                name = info.filename
                if info.is_dir() or name == "META-INF/MANIFEST.MF":
                    continue
                if name.endswith("module-info.class") or name.startswith("META-INF/maven/"):
                    continue
                data = zin.read(info)
                if name.endswith(".class"):
                    classes[relocate_name(name)] = relocate_class(data)
                elif name.startswith("META-INF/services/"):
                    lines = relocate_bytes(data).strip().splitlines()
                    services.setdefault(relocate_name(name), []).extend(lines)
                elif name.startswith("META-INF/") and "/" not in name[len("META-INF/") :]:
                    other[f"META-INF/{stem}/{name[len('META-INF/') :]}"] = data
                else:
                    other[relocate_name(name)] = data
    manifest = (
        "Manifest-Version: 1.0\r\n"
        "Multi-Release: true\r\n"
        "Created-By: icefloe tests/support/rest_server/relocate.py\r\n\r\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        zout.writestr("META-INF/MANIFEST.MF", manifest)
        for name, lines in sorted(services.items()):
            zout.writestr(name, b"\n".join(dict.fromkeys(lines)) + b"\n")
        for name, data in sorted({**other, **classes}.items()):
            zout.writestr(name, data)
