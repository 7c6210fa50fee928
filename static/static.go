package static

import "embed"

// FS holds the files served under /static/.
//
//go:embed app.css app.js live.css live.js keys.js charts.js favicon.svg vendor
var FS embed.FS
