// Package docref checks the references that comments and documents make to
// the repository's own documentation, so that every one of them can be
// followed by someone who has only the repository.
//
// The convention it enforces:
//
//   - A file reference is docs/<name>.md, or a top-level README.md or
//     BENCHMARKS.md, written anywhere in a Go file, a Markdown file, a shell
//     script, a YAML file or the Makefile; it names a file from the
//     repository root.
//   - A heading reference follows a file reference on the same line, as
//     docs/eureka-api.md, "Delta" (more headings may follow, each as
//     , "Heading"). The quoted text must equal the text of one Markdown
//     heading of that file, at any level.
//   - A Markdown link [text](other.md) or [text](other.md#anchor) names a
//     file relative to the document it is in.
//   - Nothing may point outside the repository: no reference to a design
//     or specification file kept elsewhere or to its numbered sections
//     (a section sign and a digit), no path leaving the tree, no "issue N"
//     of a tracker the repository does not hold (cite an upstream issue by
//     its URL).
//
// It owns only this check. It imports no heureka package.
package docref
