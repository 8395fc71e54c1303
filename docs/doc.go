// Package docs holds no code: it is the folder of triage's manual, and its
// tests hold the pages to the repository:
//   - TestLinksResolve: every relative link and #anchor in README.md,
//     docs/*.md and the READMEs of infra/ and localstack/ resolves to a
//     file, a folder or a heading;
//   - TestReadmeGoCompiles: the README's Go blocks compile together against
//     this module;
//   - TestReadmeIsAStart: the README has at most 300 lines, its first curl
//     within the first 60, and a link to every page here;
//   - TestLayoutListsEveryPackage: layout.md lists every package of both
//     modules once, and nothing that is no package.
//
// The transcripts the pages show run against a real `triage dev` in
// cmd/triage: TestReadmeTranscript (docs/cli.md's, then the README's) and
// TestOwnWorkerBesideDev (docs/client-and-workers.md's own worker, then
// docs/schedules.md's schedule commands).
package docs
