// Benchmark input for Hutch's lifecycle headline (test/bench -headline): a project whose
// dependencies are axios's (v1.7) dependencies and devDependencies, so that `npm ci` installs a
// real tree of a few hundred MiB from the npm registry. The benchmark's first command after a
// restore loads some of it.
const babel = require('@babel/core');
const ts = require('typescript');
console.log(`babel ${babel.version}, typescript ${ts.version}`);
