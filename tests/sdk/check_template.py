#!/usr/bin/env python3
"""The plugin SDK end to end: install tinyfin into a staging directory (meson install
--destdir), build examples/plugin-template (C, the ABI header alone) and
examples/plugin-template-cpp (C++20, the plugin kit) against that install through pkg-config
(never the source tree), then check for each that tinyfin-info lists the plugin, that its ops run on it and the rest
falls back (a program built against the installed tinyfin.pc), and that
`tinyfin-conform --plugin` passes on it. Then the same with CMake: the template and that program
built through find_package(tinyfin) against the same install.

usage: check_template.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd, env=None, cwd=None):
    print('+', ' '.join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end='', flush=True)
    if done.returncode != 0:
        sys.exit(f'check_template: {cmd[0]} exited with status {done.returncode}')
    return done.stdout


def find(root, name):
    for dirpath, _, files in os.walk(root):
        if name in files:
            return os.path.join(dirpath, name)
    sys.exit(f'check_template: {name} is not in the installed tree {root}')


def check(name, work, source, dest, pc, info, conform, libdir):
    """Builds examples/<name> (the plugin "example") with meson and with CMake and checks it."""
    work = os.path.join(work, name)
    os.makedirs(work)
    env = dict(os.environ)
    # The .pc files say prefix=/usr/local (or the configured prefix): the sysroot maps it
    # into the staging directory, as it would for a cross build.
    env['PKG_CONFIG_PATH'] = os.path.dirname(pc)
    env['PKG_CONFIG_SYSROOT_DIR'] = dest
    env['PKG_CONFIG_LIBDIR'] = os.path.dirname(pc)
    template = os.path.join(work, 'plugin-template')
    shutil.copytree(os.path.join(source, 'examples', name), template)
    plugin_build = os.path.join(work, 'plugin-build')
    run(['meson', 'setup', plugin_build, template], env=env)
    run(['ninja', '-C', plugin_build], env=env)
    plugin = os.path.join(plugin_build, 'example.so')
    flags = run(['pkg-config', '--cflags', 'tinyfin-plugin'], env=env).split()
    if not any(f.startswith('-I' + dest) for f in flags):
        sys.exit(f'check_template: {name}: tinyfin-plugin.pc does not point into the install: {flags}')

    # The installed tools find the installed core and its plugins; the example comes from
    # TINYFIN_PLUGIN_PATH.
    env = dict(os.environ)
    env['LD_LIBRARY_PATH'] = libdir
    env['TINYFIN_PLUGIN_PATH'] = plugin
    env['TINYFIN_BACKEND'] = 'auto'
    env.pop('TINYFIN_FALLBACK', None)
    report = json.loads(run([info, '--json'], env=env))
    records = [p for p in report['plugins'] if p.get('name') == 'example']
    if not records or records[0]['outcome'] != 'loaded':
        sys.exit(f'check_template: {name}: tinyfin-info does not list the example plugin as loaded: {records}')
    ops = set(records[0].get('supported_ops', []))
    if ops != {'add', 'mul', 'relu'}:
        sys.exit(f'check_template: {name}: tinyfin-info says the example supports {sorted(ops)}, want add, mul, relu')
    if any(p.get('origin') == 'build-tree' for p in report.get('search_path', [])):
        sys.exit(f'check_template: {name}: the installed core searched the build tree')

    cxx = os.environ.get('CXX', 'c++')
    pkg_env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_LIBDIR=os.path.dirname(pc),
                   PKG_CONFIG_SYSROOT_DIR=dest)
    cflags = run(['pkg-config', '--cflags', '--libs', 'tinyfin'], env=pkg_env).split()
    program = os.path.join(work, 'use-example')
    # Against a sanitizer build of libtinyfin the program must carry the same runtime first.
    needed = run(['readelf', '-d', '-W', os.path.join(libdir, 'libtinyfin.so')])
    sanitize = ['-fsanitize=address,undefined'] if 'libasan' in needed else []
    run([cxx, '-std=c++20'] + sanitize + ['-o', program, os.path.join(source, 'tests', 'sdk', 'use_example.cpp')] + cflags)
    run([program], env=env)

    run([conform, 'test', '--plugin', plugin], env=dict(env, TINYFIN_FALLBACK='error'))

    # CMake users: find_package(tinyfin) against the same install, for the plugin
    # (tinyfin::plugin) and for a program (tinyfin::tinyfin).
    prefix = os.path.dirname(os.path.dirname(info))
    find(dest, 'tinyfinConfig.cmake')
    find(dest, 'tinyfinConfigVersion.cmake')
    cmake_args = ['-DCMAKE_PREFIX_PATH=' + prefix, '-DCMAKE_BUILD_TYPE=Release']
    if sanitize:
        cmake_args.append('-DCMAKE_CXX_FLAGS=' + ' '.join(sanitize))
    cmake_plugin = os.path.join(work, 'cmake-plugin')
    run(['cmake', '-S', template, '-B', cmake_plugin] + cmake_args)
    run(['cmake', '--build', cmake_plugin])
    cmake_plugin_so = os.path.join(cmake_plugin, 'example.so')
    exported = run(['nm', '-D', '--defined-only', cmake_plugin_so]).split()
    if 'tf_plugin_entry' not in exported or len([w for w in exported if w.startswith('tf_')]) != 1:
        sys.exit(f'check_template: {name}: the CMake-built plugin exports {exported}, want tf_plugin_entry alone')
    cmake_use = os.path.join(work, 'cmake-use')
    run(['cmake', '-S', os.path.join(source, 'tests', 'sdk', 'cmake'), '-B', cmake_use] + cmake_args)
    run(['cmake', '--build', cmake_use])
    run([os.path.join(cmake_use, 'use-example')], env=dict(env, TINYFIN_PLUGIN_PATH=cmake_plugin_so))


def main():
    build, source = map(os.path.abspath, sys.argv[1:3])
    work = tempfile.mkdtemp(prefix='tinyfin-sdk-')
    try:
        dest = os.path.join(work, 'dest')
        run(['meson', 'install', '-C', build, '--no-rebuild', '--quiet', '--destdir', dest])
        pc = find(dest, 'tinyfin-plugin.pc')
        find(dest, 'tinyfin.pc')
        info = find(dest, 'tinyfin-info')
        conform = find(dest, 'tinyfin-conform')
        libdir = os.path.dirname(find(dest, 'libtinyfin.so'))
        if not os.path.isfile(os.path.join(libdir, 'tinyfin', 'plugins', 'tinyfin-cpu.so')):
            sys.exit('check_template: the cpu plugin is not installed beside libtinyfin.so')

        for name in ('plugin-template', 'plugin-template-cpp'):
            check(name, work, source, dest, pc, info, conform, libdir)
        print('check_template: ok (plugin-template, plugin-template-cpp)')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
