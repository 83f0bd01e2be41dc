// Writes the licence notice of a bundle: every npm package with code in it (esbuild's metafile), with its
// version, its licence's name and the full text of its licence file. Run by scripts/build-web-vendor.
// Usage: node licenses.mjs <metafile.json> <output>
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [metafile, output] = process.argv.slice(2);
const [bundle] = Object.values(JSON.parse(readFileSync(metafile, "utf8")).outputs);
const packages = new Set();
// Only files with bytes in the bundle: tree shaking drops whole packages esbuild had to read.
const used = Object.entries(bundle.inputs).filter(([, { bytesInOutput }]) => bytesInOutput > 0);
for (const [input] of used) {
  const match = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (match !== null) packages.add(match[1]);
}

const sections = [...packages].sort().map((name) => {
  const folder = join("node_modules", name);
  const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
  const file = readdirSync(folder).sort().find((entry) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(entry));
  if (file === undefined) throw new Error(`${name} ships no licence file; read its licence and add it here by hand.`);
  const text = readFileSync(join(folder, file), "utf8").trim();
  return `${"=".repeat(78)}\n${name}@${manifest.version} (${manifest.license})\n${"=".repeat(78)}\n\n${text}\n`;
});

writeFileSync(output, "Licences of the packages bundled into markdown-libs.js (written by scripts/build-web-vendor).\n\n"
  + sections.join("\n"));
