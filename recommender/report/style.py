"""The page's inline stylesheet and its one script (a self-check for the browser test)."""

from __future__ import annotations

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1f2937;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial,
  sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-top: 6px; border-top: 1px solid #d9dde3; }
h3 { font-size: 16px; margin: 0 0 4px; word-break: break-all; }
.sub, .muted { color: #6b7280; }
svg text.muted { fill: #6b7280; }
.note { background: #fff7e6; border: 1px solid #f3d38b; border-radius: 6px; padding: 8px 12px;
  margin: 12px 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
  gap: 12px; margin: 18px 0 8px; }
.card { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 12px 14px; }
.card .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
  color: #6b7280; }
.card .value { font-size: 26px; font-weight: 650; margin: 2px 0; }
.card .value.bad { color: #b91c1c; }
.card .value.text { font-size: 15px; padding: 8px 0 5px; overflow-wrap: anywhere; }
.card .hint { font-size: 12px; color: #6b7280; }
.panel { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 14px;
  margin: 12px 0; overflow-x: auto; }
.panel h4 { margin: 0 0 6px; font-size: 14px; }
.panel p.caption { margin: 6px 0 0; font-size: 12px; color: #6b7280; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.row > .panel { margin: 0; }
svg.chart { display: block; max-width: 100%; height: auto; font-size: 11px; }
svg.chart text { fill: #374151; }
svg.chart text.axis-label { fill: #4b5563; font-size: 12px; }
svg.chart text.strong { font-weight: 600; fill: #111827; paint-order: stroke;
  stroke: white; stroke-width: 3px; stroke-linejoin: round; }
table.data { border-collapse: collapse; width: 100%; font-size: 13px; }
table.data th, table.data td { padding: 6px 8px; border-bottom: 1px solid #eceef1;
  text-align: left; vertical-align: top; }
table.data th { font-weight: 600; color: #4b5563; background: #f8f9fb; }
table.data .num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num { position: relative; }
.bar { position: absolute; left: 8px; top: 5px; bottom: 5px; background: #dbe7fb;
  border-radius: 3px; z-index: 0; }
td.num > span:not(.bar) { position: relative; z-index: 1; }
th.bar-col { min-width: 150px; }
.bad { color: #b91c1c; font-weight: 600; }
.nowrap { white-space: nowrap; }
.badge { display: inline-block; font-size: 11px; padding: 1px 6px; border-radius: 9px;
  background: #e0e7ff; color: #3730a3; }
.badge.serving { background: #dcfce7; color: #166534; }
nav.toc { font-size: 13px; }
nav.toc a { color: #1d4ed8; text-decoration: none; margin-right: 10px; white-space: nowrap; }
.action { background: white; border: 1px solid #e3e6ea; border-radius: 8px; padding: 14px;
  margin: 16px 0; }
.action .stats { color: #4b5563; font-size: 13px; margin-bottom: 8px; }
.action .row { grid-template-columns: 1fr 1fr; }
.action .row > div { min-width: 0; }
code { font-size: 12px; background: #f1f3f5; padding: 1px 4px; border-radius: 4px; }
footer { margin-top: 40px; font-size: 12px; color: #6b7280; }
"""

SELF_CHECK = (
    "window.onerror=function(m){document.documentElement.setAttribute('data-js-error',"
    "String(m));};(function(){var s=document.querySelectorAll('svg.chart'),d=0;"
    "for(var i=0;i<s.length;i++){var b=s[i].getBoundingClientRect();"
    "if(b.width>0&&b.height>0&&s[i].childElementCount>0)d++;}"
    "var h=document.documentElement;h.setAttribute('data-svg-count',s.length);"
    "h.setAttribute('data-svg-drawn',d);h.setAttribute('data-rendered','ok');})();"
)
