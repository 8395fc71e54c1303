// Package docs holds no code: it is the folder of triage's manual, and its
// tests hold the pages to the repository. Every relative link and #anchor
// in README.md, docs/*.md and the READMEs of infra/ and localstack/
// resolves to a file, a folder or a heading (TestLinksResolve), the
// README's Go blocks compile together against this module
// (TestReadmeGoCompiles), the README stays a start (at most 300 lines,
// the first curl within 60, a link to every page: TestReadmeIsAStart), and
// layout.md lists every package of both modules
// once, with nothing listed that no longer exists (TestLayoutListsEveryPackage).
// The transcripts the pages show run against a real `triage dev` in
// cmd/triage: TestReadmeTranscript (docs/cli.md's and the README's) and
// TestOwnWorkerBesideDev (docs/client-and-workers.md's own worker).
package docs
