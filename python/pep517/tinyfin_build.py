"""tinyfin's PEP 517 build backend: meson-python's, plus editable installs where it lacks them.

Every hook is meson-python's (pyproject.toml's [tool.meson-python.args] apply). meson-python
0.13 and later have their own build_editable and it is used; Debian 12 ships 0.12, which has none,
so build_editable here makes an editable install out of an ordinary build directory:

- it configures (once) and compiles `build-editable/` (or -Cbuilddir=DIR) for the interpreter
  running pip, in scripts/build's build-tree layout (-Dwheel stays false): the build tree's
  python/ directory is importable as it is, and its uninstalled libtinyfin.so finds the plugins
  of its own build tree;
- the wheel holds a .pth file that puts DIR/python on sys.path and imports
  _tinyfin_editable, whose finder recompiles DIR (meson compile) before the first
  `import tinyfin` of a process, so edits of C++ and Python sources are picked up.

-Csetup-args=... reaches this meson setup too (e.g. -Csetup-args=-Dcuda=disabled).
"""
import base64
import hashlib
import json
import pathlib
import subprocess
import sys
import zipfile

import mesonpy
from mesonpy import build_sdist, build_wheel, get_requires_for_build_sdist, get_requires_for_build_wheel  # noqa: F401

__all__ = ['build_sdist', 'build_wheel', 'get_requires_for_build_sdist', 'get_requires_for_build_wheel',
           'build_editable', 'get_requires_for_build_editable']

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]

# The module the .pth imports: rebuilds the build directory before tinyfin is first imported.
EDITABLE_FINDER = '''\
"""tinyfin's editable install (python/pep517/tinyfin_build.py): recompiles {build_dir!r}
before the first `import tinyfin` of a process, then lets the path finder import it from
{build_dir!r}/python. TINYFIN_EDITABLE_NO_REBUILD=1 skips the rebuild."""
import os
import subprocess
import sys

BUILD_DIR = {build_dir!r}


class _RebuildFirst:
    done = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "tinyfin" or cls.done:
            return None
        cls.done = True
        if os.environ.get("TINYFIN_EDITABLE_NO_REBUILD") != "1":
            done = subprocess.run(["meson", "compile", "-C", BUILD_DIR], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                raise ImportError("tinyfin (editable): meson compile -C " + BUILD_DIR + " failed:\\n" +
                                  done.stdout[-4000:])
        return None  # the path finder imports it from BUILD_DIR/python


sys.meta_path.insert(0, _RebuildFirst)
'''


def get_requires_for_build_editable(config_settings=None):
    if hasattr(mesonpy, 'get_requires_for_build_editable'):
        return mesonpy.get_requires_for_build_editable(config_settings)
    return []


def _setting(config_settings, key):
    value = (config_settings or {}).get(key, [])
    return [value] if isinstance(value, str) else list(value)


def _run(*args):
    print('+ ' + ' '.join(args), flush=True)
    subprocess.run(args, check=True, stdout=sys.stderr)  # pip shows the backend's stderr with -v


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    if hasattr(mesonpy, 'build_editable'):
        return mesonpy.build_editable(wheel_directory, config_settings, metadata_directory)
    builddir = _setting(config_settings, 'builddir')
    build_dir = (SOURCE_DIR / (builddir[0] if builddir else 'build-editable')).resolve()
    native_file = build_dir.parent / (build_dir.name + '-native-file.ini')
    native_file.write_text(f"[binaries]\npython = '{sys.executable}'\n")
    setup = ['meson', 'setup', '--buildtype=release', '-Dtests=false', f'--native-file={native_file}',
             *_setting(config_settings, 'setup-args'), str(build_dir), str(SOURCE_DIR)]
    if (build_dir / 'meson-private' / 'coredata.dat').exists():
        setup.insert(2, '--reconfigure')
    _run(*setup)
    _run('meson', 'compile', '-C', str(build_dir), *_setting(config_settings, 'compile-args'))
    return _write_editable_wheel(pathlib.Path(wheel_directory), build_dir)


def _project_version(build_dir):
    out = subprocess.run(['meson', 'introspect', '--projectinfo', str(build_dir)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)['version']


def _metadata(version):
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    import pyproject_metadata
    config = tomllib.loads((SOURCE_DIR / 'pyproject.toml').read_text())
    metadata = pyproject_metadata.StandardMetadata.from_pyproject(config, SOURCE_DIR)
    from packaging.version import Version
    metadata.version = Version(version)
    return metadata


def _wheel_tag():
    """This interpreter's most specific tag on the plain platform (linux_x86_64): the wheel
    points at this machine's build directory, it is no manylinux wheel."""
    import sysconfig

    from packaging import tags
    platform = sysconfig.get_platform().replace('-', '_').replace('.', '_')
    return next(tag for tag in tags.sys_tags() if tag.platform == platform)


def _write_editable_wheel(wheel_directory, build_dir):
    version = _project_version(build_dir)
    metadata = _metadata(version)
    tag = _wheel_tag()
    name = f'tinyfin-{version}'
    dist_info = f'{name}.dist-info'
    files = {
        'tinyfin-editable.pth': f'{build_dir / "python"}\nimport _tinyfin_editable\n',
        '_tinyfin_editable.py': EDITABLE_FINDER.format(build_dir=str(build_dir)),
        f'{dist_info}/METADATA': bytes(metadata.as_rfc822()).decode(),
        f'{dist_info}/WHEEL': f'Wheel-Version: 1.0\nGenerator: tinyfin_build\nRoot-Is-Purelib: false\nTag: {tag}\n',
        f'{dist_info}/entry_points.txt': ('[console_scripts]\n' + ''.join(
            f'{script} = {target}\n' for script, target in metadata.scripts.items())) if metadata.scripts else '',
    }
    files = {path: text for path, text in files.items() if text}
    record = []
    wheel_path = wheel_directory / f'{name}-{tag}.whl'
    with zipfile.ZipFile(wheel_path, 'w', zipfile.ZIP_DEFLATED) as whl:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
            whl.writestr(path, data)
            record.append(f'{path},sha256={digest},{len(data)}')
        record.append(f'{dist_info}/RECORD,,')
        whl.writestr(f'{dist_info}/RECORD', '\n'.join(record) + '\n')
    return wheel_path.name
