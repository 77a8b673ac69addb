/* The support-matrix page's "ask" form and grid filters (capmatrix, generated page; no network).
 *
 * The evaluator answers from the export artifact embedded in the page (<script id="ask-data">),
 * following docs/export.md: effective values (query, role or kernel axes, model, axis default, else
 * open; aliases and spellings read as their axis and value), rule boxes, open axes decided over the
 * universe (an open int axis over its listed values and its classes), roles tried in order, the chosen
 * kernel's engine-start checks after it (step 6). It shares no code with the
 * Python resolver; tests/test_authoring_render_ask.py checks it against resolve/select/suggest in Chromium.
 * window.capmatrixAsk exposes it: values, resolve, select, suggest, ask.
 */
(function () {
  'use strict';
  var source = document.getElementById('ask-data');
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  var A = data.artifact;
  var AXES = A.axes, KERNELS = A.kernels, MODELS = A.models, ROLES = A.roles, DERIVED = A.derived;
  var AXIS_NAMES = Object.keys(AXES);
  var maskCache = {};

  // Names from a question are looked up as own properties only: "constructor" is no axis.
  function own(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }

  function QueryError(message) { this.message = message; }
  QueryError.prototype.toString = function () { return this.message; };

  // ---- values and conditions ------------------------------------------------------------------

  function spec(axis) { return own(AXES, axis) ? AXES[axis] : DERIVED[axis]; }

  /* What an open axis ranges over: the listed values, then one int for each class of ints that holds
   * none of them (as the resolver does: with sm open, sm 48 counts as much as sm 90). */
  var universes = Object.create(null);
  function universe(axis) {
    if (!(axis in universes)) {
      var s = spec(axis);
      universes[axis] = s.values.concat((s.classes || []).map(function (c) { return c.value; }));
    }
    return universes[axis];
  }

  /* The position of a value among the axis's listed values, or -1 (an int no list names: the rules'
   * conditions decide it). */
  function known(axis, value) {
    var vs = spec(axis).values;
    for (var i = 0; i < vs.length; i++) { if (vs[i] === value) { return i; } }
    return -1;
  }

  /* A value as text: a class's stand-in as the class it stands for. */
  function describeValue(axis, value) {
    if (known(axis, value) < 0) {
      var found = (spec(axis).classes || []).filter(function (c) { return c.value === value; });
      if (found.length) { return found[0].text.indexOf(' ') >= 0 ? '(' + found[0].text + ')' : found[0].text; }
    }
    return String(value);
  }

  // A query may name an axis by another name (vLLM's block_size is tokens_per_block).
  var ALIASES = Object.create(null);
  AXIS_NAMES.forEach(function (name) {
    Object.keys(AXES[name].aliases || {}).forEach(function (alias) { ALIASES[alias] = name; });
  });
  function axisName(name) { return own(AXES, name) ? name : (ALIASES[name] || null); }

  function inInterval(iv, value) {
    if (typeof value !== 'number' || !Number.isInteger(value)) { return false; }
    if ('low' in iv && (value < iv.low || (value === iv.low && !iv.low_inclusive))) { return false; }
    if ('high' in iv && (value > iv.high || (value === iv.high && !iv.high_inclusive))) { return false; }
    return true;
  }

  /* Which of an open int axis's cuts an int meets, as a bit set (BigInt: an axis may have many). */
  function signature(cuts, value) {
    var out = BigInt(0);
    for (var i = 0; i < cuts.length; i++) {
      if (holds(cuts[i], value)) { out |= BigInt(1) << BigInt(i); }
    }
    return out;
  }

  /* A condition, for a value outside the axis's universe. */
  function holds(cond, value) {
    if ('admits_none' in cond && value === 'none') { return Boolean(cond.admits_none); }
    if ('signatures' in cond && typeof value === 'number' && Number.isInteger(value)) {
      var mine = signature(AXES[cond.axis].cuts, value);
      return cond.signatures.some(function (s) { return BigInt(s) === mine; });
    }
    var hit = cond.values.some(function (v) { return v === value; }) ||
      cond.intervals.some(function (iv) { return inInterval(iv, value); }) ||
      (typeof value === 'number' && Number.isInteger(value) &&
       cond.multiple_of.some(function (m) { return value % m === 0; }));
    return hit !== Boolean(cond.negated);
  }

  function admits(rule, axis, value) {
    if (!(axis in rule.box)) { return true; }
    if (known(axis, value) >= 0) { return rule.box[axis].indexOf(value) >= 0; }
    return holds(rule.conditions[axis], value);
  }

  function findModel(name) {
    if (own(MODELS, name)) { return MODELS[name]; }
    if (name.indexOf('/') >= 0) {
      var wanted = name.toLowerCase();
      for (var key in MODELS) {
        if (MODELS[key].hf_ids.some(function (h) { return h.toLowerCase() === wanted; })) {
          return MODELS[key];
        }
      }
    }
    return null;
  }

  function modelKey(name) {
    var entry = findModel(name);
    for (var key in MODELS) { if (MODELS[key] === entry) { return key; } }
    return null;
  }

  /* The query's values by their axes' names, an enum value's other spelling read as the value it is
   * (as the resolver reads them: float16 is fp16, block_size is tokens_per_block). */
  function canonical(given) {
    var out = Object.create(null), named = Object.create(null);
    Object.keys(given || {}).forEach(function (name) {
      var axis = axisName(name);
      if (axis === null) { throw new QueryError('unknown axis ' + JSON.stringify(name)); }
      if (axis in out) {
        throw new QueryError('axis ' + JSON.stringify(axis) + ' is given twice, also as ' +
                             JSON.stringify(name === axis ? named[axis] : name) + ' (its other name); give one of them');
      }
      named[axis] = name;
      var value = given[name], spellings = AXES[axis].spellings || {};
      if (typeof value === 'string' && known(axis, value) < 0 && own(spellings, value)) { value = spellings[value]; }
      out[axis] = value;
    });
    return out;
  }

  /* Effective values: the query, then the role's or kernel's axes (with its engine's defaults), then the
   * model, then the axis default. */
  function values(given, model, roleAxes) {
    var fromModel = {};
    if (model) {
      var entry = findModel(model);
      if (!entry) { throw new QueryError('unknown model ' + JSON.stringify(model)); }
      fromModel = entry.axes;
    }
    var layers = [canonical(given), roleAxes || {}, fromModel];
    var out = Object.create(null);
    AXIS_NAMES.forEach(function (name) {
      for (var i = 0; i < layers.length; i++) {
        if (own(layers[i], name)) { out[name] = layers[i][name]; return; }
      }
      if ('default' in AXES[name]) { out[name] = AXES[name]['default']; }
    });
    Object.keys(out).forEach(function (name) {
      var info = AXES[name], value = out[name];
      if (info.type === 'enum' && known(name, value) < 0) {
        throw new QueryError(JSON.stringify(value) + ' is not a value of ' + name + ' (one of: ' +
                             info.values.join(', ') + ')');
      }
      // An int outside the axis's min / max is no input at all (capmatrix refuses it the same way).
      if (info.type === 'int' && typeof value === 'number' &&
          (('min' in info && value < info.min) || ('max' in info && value > info.max))) {
        var bounds = [];
        if ('min' in info) { bounds.push('>= ' + info.min); }
        if ('max' in info) { bounds.push('<= ' + info.max); }
        throw new QueryError('axis ' + JSON.stringify(name) + ' takes ints ' + bounds.join(' and ') +
                             '; got ' + value);
      }
    });
    return out;
  }

  // ---- boxes over the open axes -------------------------------------------------------------

  // Masks are BigInts: an axis may list more values than a 32-bit number has bits.
  function fullMask(axis) { return (BigInt(1) << BigInt(universe(axis).length)) - BigInt(1); }

  function ruleMask(kernel, index, rule, axis) {
    var key = kernel + '\u0000' + index + '\u0000' + axis;
    if (!(key in maskCache)) {
      var m = BigInt(0);
      universe(axis).forEach(function (v, j) { if (admits(rule, axis, v)) { m |= BigInt(1) << BigInt(j); } });
      maskCache[key] = m;
    }
    return maskCache[key];
  }

  /* boxes - cut, as boxes (each box: one bitmask per open axis). */
  function minus(boxes, cut) {
    var out = [];
    boxes.forEach(function (box) {
      var rest = box.slice();
      for (var i = 0; i < box.length; i++) { if ((rest[i] & cut[i]) === BigInt(0)) { out.push(box); return; } }
      for (var a = 0; a < box.length; a++) {
        var outside = rest[a] & ~cut[a];
        if (outside !== BigInt(0)) { var piece = rest.slice(); piece[a] = outside; out.push(piece); }
        rest[a] = rest[a] & cut[a];
      }
    });
    return out;
  }

  function describeBox(box, open) {
    var parts = [];
    open.forEach(function (axis, i) {
      if (box[i] === fullMask(axis)) { return; }
      var vs = universe(axis).filter(function (v, j) { return ((box[i] >> BigInt(j)) & BigInt(1)) === BigInt(1); })
        .map(function (v) { return describeValue(axis, v); });
      parts.push(axis + (vs.length === 1 ? '=' + vs[0] : ' in [' + vs.join(', ') + ']'));
    });
    return parts.join(', ') || 'always';
  }

  /* A kernel's answer for effective values (axes absent from values are open). */
  function resolve(kernel, vals) {
    var k = own(KERNELS, kernel) ? KERNELS[kernel] : null;
    if (!k) { throw new QueryError('unknown kernel ' + JSON.stringify(kernel)); }
    var open = k.relevant_axes.filter(function (a) { return !(a in vals); });
    var grants = [], excludes = [], gBoxes = [], eBoxes = [];
    k.rules.forEach(function (rule, index) {
      var applies = Object.keys(rule.box).every(function (a) { return !(a in vals) || admits(rule, a, vals[a]); });
      if (!applies) { return; }
      var box = open.map(function (a) { return a in rule.box ? ruleMask(kernel, index, rule, a) : fullMask(a); });
      if (box.some(function (m) { return m === BigInt(0); })) { return; }
      if (rule.effect === 'grant') { grants.push(rule); gBoxes.push(box); } else { excludes.push(rule); eBoxes.push(box); }
    });
    var region = [];
    gBoxes.forEach(function (g) {
      var pieces = [g];
      eBoxes.forEach(function (e) { pieces = minus(pieces, e); });
      region = region.concat(pieces);
    });
    var verdict;
    if (region.length === 0) {
      verdict = 'unsupported';
    } else if (open.length === 0) {
      verdict = 'supported';
    } else {
      var rest = [open.map(fullMask)];
      region.forEach(function (r) { rest = minus(rest, r); });
      verdict = rest.length === 0 ? 'supported' : 'depends';
    }
    var cut = eBoxes.length > 0 && verdict !== 'supported';
    return {
      kernel: kernel, verdict: verdict, open: open,
      grants: grants, excludes: cut ? excludes : [],
      residual: verdict === 'depends' ? region.map(function (b) { return describeBox(b, open); }) : [],
      closest: verdict === 'unsupported' && grants.length === 0 ? closest(k, vals) : []
    };
  }

  /* For a query no grant covers: the grants that miss it on the fewest axes, with what they need. */
  function closest(k, vals) {
    var scored = k.rules.filter(function (r) { return r.effect === 'grant'; }).map(function (rule) {
      var misses = Object.keys(rule.box).filter(function (a) { return a in vals && !admits(rule, a, vals[a]); });
      return {rule: rule, misses: misses.map(function (a) {
        return a + ' ' + rule.conditions[a].text + ' (got ' + vals[a] + ')';
      })};
    });
    scored.sort(function (x, y) { return x.misses.length - y.misses.length; });
    return scored.slice(0, 3);
  }

  // ---- roles ------------------------------------------------------------------------------

  function inWhen(when, vals) {
    var undecided = false;
    for (var b = 0; b < when.length; b++) {
      var inside = true;
      var box = when[b];
      for (var axis in box) {
        if (!(axis in vals)) { inside = null; continue; }
        var value = vals[axis];
        var hit = known(axis, value) >= 0 ? box[axis].values.indexOf(value) >= 0
          : holds(box[axis].condition, value);
        if (!hit) { inside = false; break; }
      }
      if (inside === true) { return true; }
      if (inside === null) { undecided = true; }
    }
    return undecided ? null : false;
  }

  function candidates(role, vals) {
    var entry = ROLES[role];
    if (!entry.orders) { return {list: entry.candidates.slice(), decided: true}; }
    var all = Object.assign(Object.create(null), vals);
    Object.keys(DERIVED).forEach(function (name) {
      var rows = DERIVED[name].rows;
      for (var i = 0; i < rows.length; i++) {
        var inside = rows[i].when.length ? inWhen(rows[i].when, all) : true;
        if (inside === null) { break; }
        if (inside) { all[name] = rows[i].value; break; }
      }
    });
    for (var o = 0; o < entry.orders.length; o++) {
      var order = entry.orders[o];
      var hit = order.when.length ? inWhen(order.when, all) : true;
      if (hit === null) { return {list: [], decided: false}; }
      if (hit) { return {list: order.candidates.slice(), decided: true}; }
    }
    return {list: [], decided: true};
  }

  /* The engine-start checks (docs/export.md, step 6) of a kernel the engine chose: the first of its
   * start_checks that is not supported, asked alone with the same question (the gate's own axes under
   * the role's, if any), or null when every one admits. */
  function startRefusal(kernel, given, model, roleAxes) {
    var checks = KERNELS[kernel].start_checks || [];
    for (var i = 0; i < checks.length; i++) {
      var pins = Object.assign({}, kernelAxes(checks[i]) || {}, roleAxes || {});
      var r = resolve(checks[i], values(given, model, pins));
      if (r.verdict !== 'supported') { return r; }
    }
    return null;
  }

  /* A role's answer: the first supported candidate, then its start checks (a refusal, or a check
   * that depends, is the verdict unless the selection already depends). */
  function select(role, given, model) {
    var entry = own(ROLES, role) ? ROLES[role] : null;
    if (!entry) { throw new QueryError('unknown role ' + JSON.stringify(role)); }
    var vals = values(given, model, entry.axes);
    var choice = candidates(role, vals);
    var depends = !choice.decided, winner = null, trace = [];
    for (var i = 0; i < choice.list.length; i++) {
      var r = resolve(choice.list[i], vals);
      trace.push(r);
      depends = depends || r.verdict === 'depends';
      if (r.verdict === 'supported') { winner = choice.list[i]; break; }
    }
    var start = winner ? startRefusal(winner, given, model, entry.axes) : null;
    var verdict = depends ? 'depends' : winner ? 'supported' : 'unsupported';
    return {
      role: role, kernel: winner, decided: choice.decided, trace: trace, values: vals, start: start,
      verdict: start && verdict === 'supported' ? start.verdict : verdict
    };
  }

  // ---- what would work ----------------------------------------------------------------------

  /* Axes a caller may change by default: all but the model's own geometry (its dtypes stay free). */
  function defaultVary(model) {
    var fixed = data.geometry.slice();
    var entry = model ? findModel(model) : null;
    if (entry) {
      Object.keys(entry.axes).forEach(function (a) { if (data.precision.indexOf(a) < 0) { fixed.push(a); } });
    }
    return AXIS_NAMES.filter(function (a) { return fixed.indexOf(a) < 0; });
  }

  function options(axis, vals) {
    var current = axis in vals ? known(axis, vals[axis]) : -1;
    return AXES[axis].values.filter(function (v, j) { return j !== current; });
  }

  function withChanges(vals, changes) {
    var out = Object.assign(Object.create(null), vals);
    Object.keys(changes).forEach(function (a) { out[a] = changes[a]; });
    return out;
  }

  /* The smallest changes (one axis, else two where neither works alone) that make `decide` say
   * supported, over the axes in `vary` that `relevant` lists (no other axis can change the answer). */
  function search(vals, vary, relevant, decide, maxChanges) {
    var axesTried = AXIS_NAMES.filter(function (a) { return vary.indexOf(a) >= 0 && relevant.indexOf(a) >= 0; });
    var found = [], singles = {};
    axesTried.forEach(function (a) {
      options(a, vals).forEach(function (v) {
        var c = {}; c[a] = v;
        if (decide(withChanges(vals, c))) { found.push(c); singles[a + '\u0000' + JSON.stringify(v)] = true; }
      });
    });
    if (maxChanges < 2) { return found; }
    for (var i = 0; i < axesTried.length; i++) {
      for (var j = i + 1; j < axesTried.length; j++) {
        var a = axesTried[i], b = axesTried[j];
        options(a, vals).forEach(function (va) {
          if (singles[a + '\u0000' + JSON.stringify(va)]) { return; }
          options(b, vals).forEach(function (vb) {
            if (singles[b + '\u0000' + JSON.stringify(vb)]) { return; }
            var c = {}; c[a] = va; c[b] = vb;
            if (decide(withChanges(vals, c))) { found.push(c); }
          });
        });
      }
    }
    return found;
  }

  /* The values a kernel is asked with unless the query gives its own (its engine's defaults). */
  function kernelAxes(kernel) { return own(KERNELS, kernel) ? KERNELS[kernel].axes : null; }

  /* A kernel asked alone, as the resolver asks it: with its engine's defaults under the query's values
   * (vLLM's kernels with kv_cache_dtype auto unless the query names one). */
  function resolveKernel(kernel, given, model) { return resolve(kernel, values(given, model, kernelAxes(kernel))); }

  function suggest(kernel, given, model, vary) {
    var vals = values(given, model, kernelAxes(kernel));
    if (resolve(kernel, vals).verdict === 'supported') { return []; }
    return search(vals, vary || defaultVary(model), KERNELS[kernel].relevant_axes,
                  function (v) { return resolve(kernel, v).verdict === 'supported'; }, data.max_changes);
  }

  /* For a kernel its start checks refuse: the changes that make the kernel supported and every check
   * admit (the checks' axes may change too). */
  function suggestAtStart(kernel, given, model, vary) {
    var vals = values(given, model, kernelAxes(kernel));
    var relevant = KERNELS[kernel].relevant_axes.slice();
    (KERNELS[kernel].start_checks || []).forEach(function (g) { relevant = relevant.concat(KERNELS[g].relevant_axes); });
    return search(vals, vary || defaultVary(model), relevant, function (v) {
      return resolve(kernel, v).verdict === 'supported' && startRefusal(kernel, v, null, null) === null;
    }, data.max_changes);
  }

  /* For a role: one-axis changes only (the candidates' axes and those its orders read). */
  function suggestRole(role, given, model, vary) {
    var entry = ROLES[role];
    var vals = values(given, model, entry.axes);
    var relevant = [];
    var all = entry.candidates.slice();
    (entry.orders || []).forEach(function (o) {
      o.when.forEach(function (box) { relevant = relevant.concat(Object.keys(box)); });
      all = all.concat(o.candidates);
    });
    all.forEach(function (k) { if (KERNELS[k]) { relevant = relevant.concat(KERNELS[k].relevant_axes); } });
    return search(vals, vary || defaultVary(model), relevant, function (v) {
      var sel = select(role, v, null);
      return sel.verdict === 'supported';
    }, 1);
  }

  // ---- the form -----------------------------------------------------------------------------

  var FORM_AXES = ['sm', 'phase', 'spec_dec', 'dtype', 'kv_cache_dtype'];
  var LABELS = {sm: 'GPU', phase: 'Phase', spec_dec: 'Speculative decoding', dtype: 'dtype',
                kv_cache_dtype: 'KV-cache dtype'};

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function field(form, labelText, control) {
    var label = el('label', {}, labelText + ' ');
    label.appendChild(control);
    form.appendChild(label);
  }

  // The command line's reading of a value (Axis.parse): an int axis takes an optional sign and ASCII
  // digits, a bool axis true/false, yes/no, on/off or 1/0 in any case, an optional axis "none".
  // Unlike the command line, the page refuses integers of 2^53 and beyond, which it cannot hold exactly.
  var TRUE_TEXTS = ['true', '1', 'yes', 'on'], FALSE_TEXTS = ['false', '0', 'no', 'off'];
  var MAX_INT_CHARS = 4300;

  function parseValue(name, text) {
    var axis = axisName(name);
    if (axis === null) { throw new QueryError('unknown axis ' + JSON.stringify(name)); }
    var info = AXES[axis];
    if (info.optional && text === 'none') { return 'none'; }
    if (info.type === 'int') {
      if (text.length > MAX_INT_CHARS || !/^[-+]?[0-9]+$/.test(text)) {
        throw new QueryError(axis + ' expects an integer, got ' + JSON.stringify(text));
      }
      var n = parseInt(text, 10);
      if (!Number.isSafeInteger(n)) {
        throw new QueryError(axis + ' ' + text + ' is too large for this page to compare exactly ' +
                             '(2^53 and beyond); ask capmatrix query');
      }
      return n === 0 ? 0 : n;
    }
    if (info.type === 'bool') {
      var lowered = text.toLowerCase();
      if (TRUE_TEXTS.indexOf(lowered) >= 0) { return true; }
      if (FALSE_TEXTS.indexOf(lowered) >= 0) { return false; }
      throw new QueryError(axis + ' expects true or false, got ' + JSON.stringify(text));
    }
    return text;
  }

  function buildForm(form) {
    var target = el('select', {name: 'target', id: 'ask-target'});
    var groups = [['role', Object.keys(ROLES)], ['kernel', Object.keys(KERNELS)]];
    groups.forEach(function (g) {
      var og = el('optgroup', {label: g[0] === 'role' ? 'roles (the engine picks)' : 'kernels and gates'});
      g[1].forEach(function (name) { og.appendChild(el('option', {value: g[0] + ':' + name}, g[0] + ' ' + name)); });
      target.appendChild(og);
    });
    field(form, 'Kernel or role', target);
    var model = el('input', {name: 'model', id: 'ask-model', list: 'ask-models', size: '34',
                             placeholder: 'llama3_1_70b or meta-llama/Llama-3.1-70B-Instruct'});
    var list = el('datalist', {id: 'ask-models'});
    Object.keys(MODELS).forEach(function (name) {
      list.appendChild(el('option', {value: name}, data.model_labels[name] || name));
      MODELS[name].hf_ids.forEach(function (h) { list.appendChild(el('option', {value: h})); });
    });
    form.appendChild(list);
    field(form, 'Model', model);
    FORM_AXES.forEach(function (axis) {
      if (!AXES[axis]) { return; }
      var s = el('select', {name: axis, id: 'ask-' + axis});
      s.appendChild(el('option', {value: ''}, axis === 'sm' ? 'any (leave open)' : 'from the model, else open'));
      AXES[axis].values.forEach(function (v) {
        var label = axis === 'sm' ? (data.gpu_labels[String(v)] || 'sm' + v) : String(v);
        s.appendChild(el('option', {value: String(v)}, label));
      });
      field(form, LABELS[axis], s);
    });
    field(form, 'Other axes', el('input', {name: 'more', id: 'ask-more', size: '34',
                                          placeholder: 'head_dim=128 beam_width=2'}));
    form.appendChild(el('button', {type: 'submit'}, 'Ask'));
  }

  /* The form's question as a link (#ask?...), so that it can be shared. */
  function linkOf(form) {
    var params = new URLSearchParams();
    ['target', 'model'].concat(FORM_AXES, ['more']).forEach(function (name) {
      var c = form.elements[name];
      if (c && c.value.trim() !== '') { params.set(name, c.value.trim()); }
    });
    return '#ask?' + params.toString();
  }

  function readForm(form) {
    var q = {target: form.elements.target.value, model: form.elements.model.value.trim(), given: {}};
    FORM_AXES.forEach(function (axis) {
      var c = form.elements[axis];
      if (c && c.value !== '') { q.given[axis] = parseValue(axis, c.value); }
    });
    form.elements.more.value.split(/[\s,]+/).filter(Boolean).forEach(function (pair) {
      var m = /^([a-z0-9_]+)=(.+)$/.exec(pair);
      if (!m) { throw new QueryError('write other axes as axis=value, got ' + JSON.stringify(pair)); }
      q.given[m[1]] = parseValue(m[1], m[2]);
    });
    return q;
  }

  /* One question, answered: {verdict, kernel, reasons, suggestions, values} or {error}. */
  function ask(q) {
    var parts = q.target.split(':');
    var kind = parts[0], name = parts.slice(1).join(':');
    var model = q.model || null;
    if (model && !findModel(model)) { throw new QueryError('unknown model ' + JSON.stringify(model)); }
    if (kind === 'role') {
      var sel = select(name, q.given, model);
      var decisive = sel.kernel ? sel.trace[sel.trace.length - 1] : null;
      return {kind: kind, name: name, verdict: sel.verdict, kernel: sel.kernel, values: sel.values,
              trace: sel.trace, decided: sel.decided, result: decisive, start: sel.start,
              suggestions: sel.verdict === 'supported' ? [] : suggestRole(name, q.given, model)};
    }
    var r = resolveKernel(name, q.given, model);
    var vals = values(q.given, model, kernelAxes(name));
    var start = r.verdict === 'supported' ? startRefusal(name, q.given, model, null) : null;
    return {kind: kind, name: name, verdict: start ? start.verdict : r.verdict, own: r.verdict, kernel: name,
            values: vals, trace: [r], result: r, start: start,
            suggestions: start ? suggestAtStart(name, q.given, model) :
              r.verdict === 'supported' ? [] : suggest(name, q.given, model)};
  }

  function reasonItem(rule, kind) {
    var li = el('li', {'class': 'reason', 'data-rule': rule.id, 'data-kind': kind});
    li.appendChild(el('span', {}, kind === 'grant' ? 'granted by ' : 'excluded by '));
    li.appendChild(el('code', {}, rule.id));
    li.appendChild(el('span', {'class': 'status-' + rule.status}, ' (' + rule.status.replace(/_/g, ' ') + '; ' +
      rule.location.file + ':' + rule.location.line + ')'));
    li.appendChild(el('div', {'class': 'why'}, 'Reason: ' + rule.reason));
    li.appendChild(el('div', {'class': 'src'}, 'Source: ' + rule.source));
    return li;
  }

  function explain(list, r) {
    r.excludes.forEach(function (rule) { list.appendChild(reasonItem(rule, 'exclude')); });
    if (r.verdict !== 'unsupported') {
      // As the resolver lists them: at most data.max_grants grants, then how many more apply.
      r.grants.slice(0, data.max_grants).forEach(function (rule) { list.appendChild(reasonItem(rule, 'grant')); });
      if (r.grants.length > data.max_grants) {
        list.appendChild(el('li', {'class': 'more'}, '… and ' + (r.grants.length - data.max_grants) +
          ' other grants that apply'));
      }
    }
    if (r.verdict === 'depends') {
      list.appendChild(el('li', {'class': 'residual'}, 'Supported when: ' + r.residual.slice(0, 6).join(' or ') +
        (r.residual.length > 6 ? ' or …' : '') + ' (open: ' + r.open.join(', ') + ')'));
    }
    if (r.closest.length) {
      var li = el('li', {}, 'No grant applies. The closest grants need:');
      var sub = el('ul');
      r.closest.forEach(function (c) {
        sub.appendChild(el('li', {'class': 'closest', 'data-rule': c.rule.id},
          c.rule.id + ': ' + c.misses.join(', ')));
      });
      li.appendChild(sub);
      list.appendChild(li);
    }
  }

  function startWords(r) {
    return r.verdict === 'unsupported' ? 'then refused at engine start by gate ' + r.kernel :
      'then at engine start gate ' + r.kernel + ' depends on values the question leaves open';
  }

  function show(answerBox, q, link) {
    answerBox.textContent = '';
    var a;
    try {
      a = ask(q);
    } catch (err) {
      if (!(err instanceof QueryError)) { throw err; }
      answerBox.setAttribute('data-verdict', 'error');
      answerBox.appendChild(el('p', {'class': 'ask-error'}, 'Cannot ask: ' + err.message));
      return;
    }
    answerBox.setAttribute('data-verdict', a.verdict);
    answerBox.setAttribute('data-kernel', a.kernel || '');
    var head = el('p', {'class': 'verdict ' + a.verdict});
    var symbol = {supported: '✓', unsupported: '✗', depends: '?'}[a.verdict];
    head.appendChild(el('b', {'class': 'sw ' + (a.verdict === 'depends' ? 'partial' : a.verdict)}, symbol));
    head.appendChild(document.createTextNode(' ' + a.kind + ' ' + a.name + ': '));
    head.appendChild(el('b', {'class': 'word'}, a.verdict));
    if (a.kind === 'role') {
      head.appendChild(document.createTextNode(a.start ? ' (' + a.kernel + ' is chosen, ' + startWords(a.start) + ')' :
        a.kernel ? ' (' + a.kernel + ' serves it)' :
        a.decided ? ' (no candidate serves it)' : ' (the candidate order depends on an open axis)'));
    } else if (a.start) {
      head.appendChild(document.createTextNode(' (the kernel itself is ' + a.own + ', ' + startWords(a.start) + ')'));
    }
    answerBox.setAttribute('data-start-gate', a.start ? a.start.kernel : '');
    answerBox.appendChild(head);
    answerBox.appendChild(el('h3', {}, 'Why'));
    var why = el('ul', {'class': 'reasons'});
    a.trace.forEach(function (r) {
      if (a.kind === 'role') {
        var li = el('li', {'class': 'candidate', 'data-kernel': r.kernel}, r.kernel + ': ' + r.verdict);
        var sub = el('ul');
        explain(sub, r);
        li.appendChild(sub);
        why.appendChild(li);
      } else {
        explain(why, r);
      }
    });
    if (a.start) {  // as the command line's !! line: the check that stops the engine, its reason whole
      var stop = el('li', {'class': 'start-check', 'data-kernel': a.start.kernel}, startWords(a.start) + ':');
      var reasons = el('ul');
      explain(reasons, a.start);
      stop.appendChild(reasons);
      why.appendChild(stop);
    }
    answerBox.appendChild(why);
    if (a.verdict !== 'supported') {
      answerBox.appendChild(el('h3', {}, 'What would work'));
      var ul = el('ul', {'class': 'suggestions'});
      if (a.suggestions.length === 0) { ul.appendChild(el('li', {}, 'no change of one or two axes the caller may vary')); }
      a.suggestions.forEach(function (c) {
        ul.appendChild(el('li', {'class': 'suggestion', 'data-changes': JSON.stringify(c)},
          'set ' + Object.keys(c).map(function (k) { return k + '=' + c[k]; }).join(' and ')));
      });
      answerBox.appendChild(ul);
    }
    var used = Object.keys(a.values).filter(function (k) { return AXES[k] && !('default' in AXES[k] && AXES[k]['default'] === a.values[k]); });
    answerBox.appendChild(el('p', {'class': 'values'}, 'Values used (besides axis defaults): ' +
      (used.map(function (k) { return k + '=' + a.values[k]; }).join(' ') || 'none') + '.'));
    var p = el('p');
    p.appendChild(el('a', {'class': 'permalink', href: link}, 'Link to this question'));
    answerBox.appendChild(p);
  }

  function setupAsk() {
    var form = document.getElementById('ask-form');
    var answerBox = document.getElementById('ask-answer');
    if (!form || !answerBox) { return; }
    buildForm(form);
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var link = linkOf(form);
      if (window.history && window.history.replaceState) { window.history.replaceState(null, '', link); }
      try { show(answerBox, readForm(form), link); } catch (err) {
        if (!(err instanceof QueryError)) { throw err; }
        answerBox.setAttribute('data-verdict', 'error');
        answerBox.textContent = 'Cannot ask: ' + err.message;
      }
    });
    // #ask?target=kernel:xqa&model=llama&sm=120 fills the form and asks (a question can be linked to),
    // then brings its answer into view and focuses it: a shared link lands on the answer, not the top.
    function fromHash() {
      var m = /^#ask\?(.*)$/.exec(window.location.hash);
      if (!m) { return; }
      form.reset();
      new URLSearchParams(m[1]).forEach(function (value, key) {
        if (form.elements[key]) { form.elements[key].value = value; }
      });
      form.requestSubmit();
      answerBox.scrollIntoView({block: 'start'});
      answerBox.focus({preventScroll: true});
    }
    window.addEventListener('hashchange', fromHash);
    fromHash();
  }

  // ---- search -------------------------------------------------------------------------------

  /* Case, spaces and punctuation do not count: "rtx 50", "RTX-50" and "rtx50" find "RTX 50". */
  function norm(text) { return String(text).toLowerCase().replace(/[^a-z0-9]+/g, ''); }

  function setupSearch() {
    var section = document.getElementById('search');
    var box = document.getElementById('search-box');
    var results = document.getElementById('search-results');
    var summary = document.getElementById('search-summary');
    if (!section || !box || !results || !summary) { return; }
    section.hidden = false;
    var anchors = {kernel: {}, role: {}};
    document.querySelectorAll('section[data-kernel]').forEach(function (s) { anchors.kernel[s.getAttribute('data-kernel')] = s.id; });
    document.querySelectorAll('section[data-role]').forEach(function (s) { anchors.role[s.getAttribute('data-role')] = s.id; });
    var gpuTarget = document.getElementById('common-configurations') ? '#common-configurations' : '#overview';
    var entries = [];
    Object.keys(KERNELS).forEach(function (k) {
      entries.push({kind: 'kernel', name: k, label: k, terms: [k], href: '#' + (anchors.kernel[k] || 'overview')});
    });
    Object.keys(ROLES).forEach(function (r) {
      entries.push({kind: 'role', name: r, label: r, terms: [r], href: '#' + (anchors.role[r] || 'overview')});
    });
    Object.keys(MODELS).forEach(function (m) {
      var label = data.model_labels[m] || m;
      entries.push({kind: 'model', name: m, label: label === m ? m : label + ' (' + m + ')',
                    terms: [m, label].concat(MODELS[m].hf_ids), href: '#filter?model=' + encodeURIComponent(m)});
    });
    Object.keys(data.gpu_labels).forEach(function (sm) {
      entries.push({kind: 'gpu', name: sm, label: data.gpu_labels[sm], terms: [data.gpu_labels[sm], 'sm' + sm],
                    href: gpuTarget});
    });
    var KINDS = [['kernel', 'kernel', 'kernels'], ['role', 'role', 'roles'], ['model', 'model', 'models'],
                 ['gpu', 'GPU', 'GPUs']];
    var MAX_RESULTS = 30;

    function mark(e, off) { if (off) { e.setAttribute('data-unmatched', ''); } }
    function members(role) {
      var out = ROLES[role].candidates.slice();
      (ROLES[role].orders || []).forEach(function (o) { out = out.concat(o.candidates); });
      return out;
    }
    function columns(attr, keep) {
      document.querySelectorAll('table[' + attr + ']').forEach(function (t) {
        var cols = JSON.parse(t.getAttribute(attr));
        t.querySelectorAll('tr').forEach(function (tr) {
          for (var i = 1; i < tr.children.length; i++) { mark(tr.children[i], !keep[cols[i - 1]]); }
        });
      });
    }

    function apply() {
      document.querySelectorAll('[data-unmatched]').forEach(function (e) { e.removeAttribute('data-unmatched'); });
      results.textContent = '';
      var n = norm(box.value);
      section.setAttribute('data-query', n);
      if (!n) { summary.textContent = ''; return; }
      var hit = {kernel: {}, role: {}, model: {}, gpu: {}}, count = {kernel: 0, role: 0, model: 0, gpu: 0}, found = [];
      entries.forEach(function (e) {
        if (e.terms.some(function (t) { return norm(t).indexOf(n) >= 0; })) {
          hit[e.kind][e.name] = true; count[e.kind] += 1; found.push(e);
        }
      });
      if (found.length === 0) {
        summary.textContent = 'Nothing matches \u201c' + box.value.trim() + '\u201d; the page shows everything.';
        return;
      }
      summary.textContent = KINDS.filter(function (k) { return count[k[0]]; }).map(function (k) {
        return count[k[0]] + ' ' + (count[k[0]] === 1 ? k[1] : k[2]);
      }).join(', ') + ' match; the grids show only those.';
      found.slice(0, MAX_RESULTS).forEach(function (e) {
        var li = el('li', {'class': 'result', 'data-kind': e.kind, 'data-name': e.name});
        li.appendChild(el('span', {'class': 'kind'}, e.kind === 'gpu' ? 'GPU' : e.kind));
        li.appendChild(document.createTextNode(' '));
        li.appendChild(el('a', {href: e.href}, e.label));
        results.appendChild(li);
      });
      if (found.length > MAX_RESULTS) { results.appendChild(el('li', {}, '\u2026 and ' + (found.length - MAX_RESULTS) + ' more')); }
      // Kernels: those named, and the candidates of the roles named; roles: those named, and those
      // listing a kernel named.
      var kernels = Object.assign({}, hit.kernel), roles = Object.assign({}, hit.role);
      Object.keys(hit.role).forEach(function (r) { members(r).forEach(function (k) { kernels[k] = true; }); });
      Object.keys(ROLES).forEach(function (r) {
        if (members(r).some(function (k) { return hit.kernel[k]; })) { roles[r] = true; }
      });
      var someKernel = Object.keys(kernels).length > 0, someModel = count.model > 0;
      if (someKernel) {
        document.querySelectorAll('section[data-kernel], tr[data-kernel]').forEach(function (e) {
          mark(e, !kernels[e.getAttribute('data-kernel')]);
        });
      } else if (someModel) {  // the kernels that support none of the models named
        document.querySelectorAll('section[data-kernel]').forEach(function (s) {
          mark(s, !(s.getAttribute('data-models') || '').split(' ').some(function (m) { return hit.model[m]; }));
        });
      }
      if (Object.keys(roles).length) {
        document.querySelectorAll('section[data-role]').forEach(function (s) { mark(s, !roles[s.getAttribute('data-role')]); });
      }
      if (someModel) {
        document.querySelectorAll('tr[data-model]').forEach(function (tr) { mark(tr, !hit.model[tr.getAttribute('data-model')]); });
        columns('data-column-models', hit.model);
      }
      if (count.gpu) {
        document.querySelectorAll('tr[data-sm]').forEach(function (tr) {
          var sm = tr.getAttribute('data-sm');
          mark(tr, sm !== '' && !hit.gpu[sm]);
        });
        columns('data-column-sms', hit.gpu);
      }
    }
    box.addEventListener('input', apply);
    apply();
  }

  // ---- filters ------------------------------------------------------------------------------

  function setupFilters() {
    var byModel = document.getElementById('filter-model');
    var byRole = document.getElementById('filter-role');
    if (!byModel || !byRole) { return; }
    function words(e, attr) { return (e.getAttribute(attr) || '').split(' '); }
    function apply() {
      var model = byModel.value, role = byRole.value;
      var members = null;
      if (role) {
        members = ROLES[role].candidates.slice();
        (ROLES[role].orders || []).forEach(function (o) { members = members.concat(o.candidates); });
      }
      document.querySelectorAll('section[data-kernel]').forEach(function (s) {
        s.hidden = Boolean((role && words(s, 'data-roles').indexOf(role) < 0) ||
                           (model && words(s, 'data-models').indexOf(model) < 0));
      });
      document.querySelectorAll('section[data-role]').forEach(function (s) {
        s.hidden = Boolean(role && s.getAttribute('data-role') !== role);
      });
      document.querySelectorAll('tr[data-kernel]').forEach(function (tr) {
        tr.hidden = Boolean(members && members.indexOf(tr.getAttribute('data-kernel')) < 0);
      });
      document.querySelectorAll('tr[data-model]').forEach(function (tr) {
        tr.hidden = Boolean(model && tr.getAttribute('data-model') !== model);
      });
      document.querySelectorAll('table[data-column-models]').forEach(function (t) {
        var cols = JSON.parse(t.getAttribute('data-column-models'));
        t.querySelectorAll('tr').forEach(function (tr) {
          var cells = tr.children;
          for (var i = 1; i < cells.length; i++) {
            cells[i].hidden = Boolean(model && cols[i - 1] !== model);
          }
        });
      });
      document.body.setAttribute('data-filter', (model || '*') + ' ' + (role || '*'));
    }
    byModel.addEventListener('change', apply);
    byRole.addEventListener('change', apply);
    // #filter?model=deepseek_v3&role=trtllm_generation sets the filters (on load, or from a link).
    function fromHash() {
      var m = /^#filter\?(.*)$/.exec(window.location.hash);
      if (m) {
        var params = new URLSearchParams(m[1]);
        byModel.value = params.get('model') || '';
        byRole.value = params.get('role') || '';
        document.getElementById('filter').scrollIntoView({block: 'start'});
      }
      apply();
    }
    window.addEventListener('hashchange', fromHash);
    fromHash();
  }

  window.capmatrixAsk = {values: values, resolve: resolve, resolveKernel: resolveKernel, select: select,
                         suggest: suggest, startRefusal: startRefusal, suggestAtStart: suggestAtStart,
                         suggestRole: suggestRole, ask: ask, modelKey: modelKey, parseValue: parseValue,
                         QueryError: QueryError};
  setupAsk();
  setupFilters();
  setupSearch();
})();
