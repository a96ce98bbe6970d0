// Bundles src/app.ts (with @xterm/xterm, its CSS and the Hutch addon) into dist/app.js and
// dist/app.css, and copies index.html: the files hutchd serves at /console/.
import * as esbuild from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';

await mkdir('dist', { recursive: true });
await esbuild.build({
  entryPoints: { app: 'src/app.ts' },
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: 'linked',
  outdir: 'dist',
  logLevel: 'warning',
});
await copyFile('index.html', 'dist/index.html');
