// djx-bpf HTML report: lays out the report data of #djx-data.
// Every string in the data comes from the profiled JVM or a file and is
// hostile: it reaches the page only as textContent or a DOM property
// (title), never through innerHTML; frames are keyed in Maps, not in plain
// objects, as a frame may well be named "__proto__".
(function () {
  'use strict';
  var t0 = performance.now();
  var data = JSON.parse(document.getElementById('djx-data').textContent);
  var ROW = 18;       // px per flame graph row
  var MIN_W = 0.002;  // frames narrower than this share of the focus are not drawn
  var st = { v: null, key: 'samples', desc: true, sel: 0, flame: null };

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, tag, cls, text) { return parent.appendChild(el(tag, cls, text)); }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function pct(x) { return (100 * x).toFixed(1) + '%'; }
  // num groups thousands by hand: toLocaleString starts ICU, tens of ms.
  function num(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function of(n, total) { return total > 0 ? n / total : 0; }

  // showView renders view i: everything below the header is its.
  function showView(i) {
    var v = data.views[i];
    st.v = v;
    st.sel = 0;
    $('header').textContent = v.header;
    drawObjects();
    var more = [];
    if (v.more) more.push(v.more + ' more objects with ' + num(v.more_samples) + ' samples (--top 0 shows all)');
    if (v.quiet) more.push(v.quiet + ' allocation sites had no samples (--format json lists them)');
    $('objects-more').textContent = more.join('; ');
    drawTypes(v);
    drawRegions(v);
    $('stats').textContent = (v.stats || []).join('\n');
    list($('notes'), (v.notes || []).map(function (n) { return 'note: ' + n; }));
    select(0);
  }

  function list(ul, items) {
    clear(ul);
    items.forEach(function (s) { add(ul, 'li', '', s); });
  }

  // drawObjects fills the objects table in the current sort order.
  function drawObjects() {
    var objs = st.v.objects.slice(), k = st.key, d = st.desc ? -1 : 1;
    objs.sort(function (a, b) { return a[k] === b[k] ? a.rank - b.rank : (a[k] < b[k] ? -d : d); });
    var body = clear(document.querySelector('#objects tbody'));
    if (!objs.length) add(add(body, 'tr'), 'td', 'dim', 'no samples hit a tracked object').colSpan = 9;
    objs.forEach(function (o) {
      var tr = add(body, 'tr', 'row' + (o.rank === st.sel ? ' sel' : ''));
      tr.dataset.rank = o.rank;
      add(tr, 'td', 'num', o.rank);
      add(tr, 'td', 'type', o.type);
      var site = add(tr, 'td', 'site', o.site);
      add(site, 'span', 'badge', o.origin);
      if (o.fields && o.fields.length) add(site, 'div', 'fields', 'fields: ' + fieldsText(o.fields, 3));
      add(tr, 'td', 'num', num(o.objects) + ' (' + num(o.est_objects) + ')');
      add(tr, 'td', 'num', o.bytes_text);
      add(tr, 'td', 'num', o.retained_text || '-');
      add(tr, 'td', 'num', num(o.samples));
      add(tr, 'td', 'num', num(o.est_samples));
      var share = add(tr, 'td', 'num share');
      add(share, 'span', 'bar').style.width = Math.max(1, Math.round(60 * o.share)) + 'px';
      share.appendChild(document.createTextNode(pct(o.share)));
      tr.addEventListener('click', function () { select(o.rank === st.sel ? 0 : o.rank); });
    });
    document.querySelectorAll('#objects th.sort').forEach(function (th) {
      th.classList.remove('asc', 'desc');
      if (th.dataset.key === st.key) th.classList.add(st.desc ? 'desc' : 'asc');
    });
  }

  // select shows object rank's details and flame graph (0: the whole
  // profile's).
  function select(rank) {
    st.sel = rank;
    document.querySelectorAll('#objects tr.row').forEach(function (tr) {
      tr.classList.toggle('sel', Number(tr.dataset.rank) === rank);
    });
    var o = st.v.objects[rank - 1], box = clear($('detail'));
    box.hidden = !o;
    if (!o) return flame('whole profile', wholeTree(st.v));
    add(box, 'h3', '', '#' + o.rank + ' ' + o.type + ' — ' + pct(o.share) + ' of attributed samples');
    if (o.held) {
      var others = o.other_roots === 1 ? '; 1 other root reaches it' : o.other_roots ? '; ' + o.other_roots + (o.other_roots >= 64 ? ' or more' : '') + ' other roots reach it' : '';
      add(box, 'h4', '', 'held by (from its GC root' + others + ')');
      var ol = add(box, 'ol', 'chain');
      o.holder.forEach(function (h) { add(ol, 'li', '', h); });
    } else {
      add(box, 'h4', '', 'allocated at (innermost frame first)');
      var al = add(box, 'ol', 'chain');
      (o.alloc_path && o.alloc_path.length ? o.alloc_path : [o.alloc_site]).forEach(function (f) { add(al, 'li', '', f); });
    }
    if (o.fields && o.fields.length) {
      add(box, 'h4', '', 'fields (share of its samples)');
      add(box, 'p', 'paths', fieldsText(o.fields, 0));
    }
    add(box, 'h4', '', 'access paths (share of its samples, innermost frame first)');
    box.appendChild(pathList(o.paths, o.samples));
    flame('#' + o.rank + ' ' + o.type + ' ' + o.site, objectTree(o));
  }

  // fieldsText lists the first n fields (0: all) with their shares.
  function fieldsText(fs, n) {
    var shown = n ? fs.slice(0, n) : fs;
    var s = shown.map(function (f) { return f.field + ' ' + pct(f.share); }).join(', ');
    return fs.length > shown.length ? s + ', ' + (fs.length - shown.length) + ' more' : s;
  }

  // pathList lists paths with their share of total.
  function pathList(paths, total) {
    var ol = el('ol', 'paths');
    (paths || []).forEach(function (p) {
      var li = add(ol, 'li');
      add(li, 'span', 'n', pct(of(p.n, total)) + ' ' + num(p.n));
      if (p.t) add(li, 'span', 't', '[' + p.t + ']');
      add(li, 'span', 'f', p.f.join(' ← '));
    });
    if (!ol.firstChild) add(ol, 'li', 'dim', 'no access paths');
    return ol;
  }

  // Flame graph trees: node(name) has n samples and kids; addPath adds a
  // path (innermost first) under a node, outermost frame on top.
  function node(name, kind, parent) {
    return { name: name, kind: kind, n: 0, kids: [], idx: new Map(), parent: parent };
  }
  function child(nd, name, kind) {
    var c = nd.idx.get(name);
    if (!c) { c = node(name, kind || kindOf(name), nd); nd.idx.set(name, c); nd.kids.push(c); }
    return c;
  }
  function addPath(nd, p) {
    nd.n += p.n;
    if (p.t) { nd = child(nd, '[type] ' + p.t, 'meta'); nd.n += p.n; }
    for (var i = p.f.length - 1; i >= 0; i--) { nd = child(nd, p.f[i]); nd.n += p.n; }
  }
  function kindOf(f) {
    if (f.charAt(0) === '[') return 'meta';
    if (f.indexOf('`') >= 0 || f.indexOf('.so') >= 0) return 'native';
    return /^(java|javax|jdk|sun|com\.sun)\./.test(f) ? 'jdk' : 'java';
  }
  function objectName(o) { return '[object] ' + o.type + ' @ ' + o.site; }
  function objectTree(o) {
    var root = node(objectName(o), 'obj', null);
    o.paths.forEach(function (p) { addPath(root, p); });
    root.n = Math.max(root.n, o.samples);
    return root;
  }
  function wholeTree(v) {
    var root = node('all samples', 'root', null);
    v.objects.forEach(function (o) {
      var c = child(root, objectName(o), 'obj');
      o.paths.forEach(function (p) { addPath(c, p); });
      c.n = Math.max(c.n, o.samples);
    });
    if (v.more_samples) child(root, '[' + v.more + ' more objects]', 'obj').n = v.more_samples;
    (v.regions || []).forEach(function (r) {
      var c = child(root, '[not in a tracked object: ' + r.where + ']', 'region');
      r.paths.forEach(function (p) { addPath(c, p); });
    });
    root.n = root.kids.reduce(function (s, k) { return s + k.n; }, 0);
    return root;
  }

  function flame(title, root) {
    st.flame = { root: root, focus: root };
    $('flame-title').textContent = title;
    drawFlame();
  }

  // drawFlame draws the focused frame full width, its ancestors above it
  // (dimmed) and its callees below, each as wide as its samples.
  function drawFlame() {
    var box = clear($('flame')), f = st.flame, chain = [], depth = 0;
    for (var a = f.focus; a; a = a.parent) chain.unshift(a);
    chain.forEach(function (nd) { frame(box, nd, 0, 1, depth++, nd !== f.focus); });
    depth = Math.max(depth, walk(box, f.focus, 0, 1, depth));
    box.style.height = depth * ROW + 'px';
    $('flame-info').textContent = f.focus.name + ': ' + num(f.focus.n) + ' samples' +
      (f.focus === f.root ? '' : ', ' + pct(of(f.focus.n, f.root.n)) + ' of ' + f.root.name);
  }
  // walk draws nd's kids from x, w wide, at row d; it returns the rows used.
  function walk(box, nd, x, w, d) {
    var rows = d, kids = nd.kids.slice().sort(function (a, b) { return b.n - a.n; });
    kids.forEach(function (k) {
      var kw = w * of(k.n, nd.n);
      if (kw >= MIN_W) {
        frame(box, k, x, kw, d, false);
        rows = Math.max(rows, walk(box, k, x, kw, d + 1));
      }
      x += kw;
    });
    return Math.max(rows, d);
  }
  var HUE = { java: [12, 40], jdk: [42, 16], native: [0, 0], meta: [210, 8], obj: [205, 25], region: [270, 20], root: [0, 0] };
  function frame(box, nd, x, w, d, anc) {
    var f = add(box, 'div', 'fr ' + nd.kind + (anc ? ' anc' : ''), nd.name);
    f.style.left = (100 * x) + '%';
    f.style.width = (100 * w) + '%';
    f.style.top = (d * ROW) + 'px';
    var h = HUE[nd.kind], s = 0;
    for (var i = 0; i < nd.name.length; i++) s = (s * 31 + nd.name.charCodeAt(i)) % 997;
    f.style.background = 'hsl(' + (h[0] + s % (h[1] + 1)) + ',' + (nd.kind === 'native' || nd.kind === 'root' ? 0 : 70) + '%,' + (72 + s % 12) + '%)';
    f.title = nd.name + ': ' + num(nd.n) + ' samples (' + pct(of(nd.n, st.flame.root.n)) + ')';
    f.addEventListener('click', function () { st.flame.focus = nd; drawFlame(); });
  }

  // drawTypes fills the data types table; a click on a row lists its
  // paths under it and draws its flame graph.
  function drawTypes(v) {
    $('types-title').textContent = 'share of in-heap samples; named ' + pct(v.named_share) + ' of samples with an address';
    var body = clear(document.querySelector('#types tbody'));
    (v.data_types || []).forEach(function (d, i) {
      var tr = add(body, 'tr', 'row'), open = null;
      [i + 1, d.type, d.field].forEach(function (s, c) { add(tr, 'td', c ? '' : 'num', s); });
      add(tr, 'td', 'num', num(d.samples));
      add(tr, 'td', 'num', pct(d.share));
      tr.addEventListener('click', function () {
        if (open) { open.remove(); open = null; return; }
        open = el('tr', 'paths-row');
        var td = add(open, 'td');
        td.colSpan = 5;
        td.appendChild(pathList(d.paths, d.samples));
        tr.after(open);
        var name = d.type + (d.field === '[]' || d.field === '-' ? '' : '.' + d.field), root = node('[type] ' + name, 'obj', null);
        d.paths.forEach(function (p) { addPath(root, p); });
        flame('data type ' + name, root);
      });
    });
    $('types-more').textContent = v.more_data_types ? v.more_data_types + ' more data types (--top 0 shows all)' : '';
  }

  function drawRegions(v) {
    var box = clear($('regions'));
    if (!v.regions || !v.regions.length) add(box, 'p', 'dim', 'every sample with a path hit a tracked object');
    (v.regions || []).forEach(function (r) {
      var det = add(box, 'details');
      add(det, 'summary', '', r.where + ': ' + num(r.samples) + ' samples (' + pct(r.share) + ')');
      det.appendChild(pathList(r.paths, v.samples));
    });
  }

  function drawScan(s) {
    $('scan').hidden = false;
    $('scan-stats').textContent = [s.line].concat(s.stats || []).join('\n');
    list($('scan-notes'), (s.skipped || []).map(function (k) { return 'skipped ' + k; })
      .concat((s.notes || []).map(function (n) { return 'note: ' + n; })));
  }

  // Wiring: the JVM selector, sorting, the flame graph's buttons.
  var pick = $('jvm');
  data.views.forEach(function (v, i) { add(pick, 'option', '', v.label).value = i; });
  $('jvm-pick').hidden = data.views.length < 2;
  pick.addEventListener('change', function () { showView(Number(pick.value)); });
  document.querySelectorAll('#objects th.sort').forEach(function (th) {
    th.addEventListener('click', function () {
      st.desc = th.dataset.key === st.key ? !st.desc : true;
      st.key = th.dataset.key;
      drawObjects();
    });
  });
  $('flame-all').addEventListener('click', function () { select(0); });
  $('flame-reset').addEventListener('click', function () { st.flame.focus = st.flame.root; drawFlame(); });
  if (data.scan) drawScan(data.scan);

  // The fragment picks a view, then clicks as a user would (#jvm=1&sort=bytes&
  // select=2&zoom=1: the bytes header, row 2, flame frame 1): links to one
  // object, and the browser tests' clicks.
  var want = Object.create(null);
  location.hash.slice(1).split('&').forEach(function (kv) {
    var p = kv.split('=');
    want[p[0]] = p[1] || '';
  });
  var vi = Math.min(Math.max(Number(want.jvm) || 0, 0), data.views.length - 1);
  pick.value = vi;
  showView(vi);
  function click(e) { if (e) e.click(); }
  if (want.sort) click(document.querySelector('#objects th[data-key="' + want.sort.replace(/[^a-z_]/g, '') + '"]'));
  if (want.select) click(document.querySelector('#objects tr[data-rank="' + (Number(want.select) || 0) + '"]'));
  if (want.zoom) click(document.querySelectorAll('#flame .fr')[Number(want.zoom) || 0]);
  // Timings for the tests and docs/html.md: ms since navigation start
  // when drawn and at DOMContentLoaded, and this script's own time.
  document.body.dataset.renderedMs = performance.now().toFixed(1);
  document.body.dataset.scriptMs = (performance.now() - t0).toFixed(1);
  document.addEventListener('DOMContentLoaded', function () { document.body.dataset.domReadyMs = performance.now().toFixed(1); });
})();
