// Package static holds the dashboard's CSS and scripts, and its vendored
// scripts at pinned versions, embedded into the binary with an embed
// directive (static.go). A vendored file's name carries its version; each
// is the file its npm package ships, unchanged, beside its licence:
//
//   - vendor/htmx-2.0.11.min.js: htmx.org 2.0.11, dist/htmx.min.js
//     (htmx-LICENSE)
//   - vendor/htmx-ext-sse-2.2.4.min.js: htmx-ext-sse 2.2.4, dist/sse.min.js
//     (htmx-ext-sse-LICENSE; npm integrity of the package
//     sha512-LJmxVhykyflBWgh5PvbRidcyuqMHlgfajmmzumvKctv9puvsufeH6OaejSMZTNTnEI8O2wXXn4ZZtBdpEMqmEQ==)
package static
