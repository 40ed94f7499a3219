// schema_form.js — a form made from a kind's params JSON Schema (GET /v1/kinds), for the subset
// of draft 2020-12 the kinds use: objects (properties, required), enums, booleans, numbers and
// integers (minimum, maximum, exclusiveMinimum), strings (minLength, maxLength), arrays
// (numbers as a list, anything else as JSON), anyOf / oneOf (a choice of forms), const,
// default, title, description. Fields left empty are left out: the server applies its own
// defaults. The server checks everything again; its problem+json "field" (params.a.b) comes
// back to showError, which puts the message under that field.
import { h, newId } from './dom.js';
import { fieldError } from './forms.js';

function typeOf(schema) {
  if (!schema || typeof schema !== 'object') return 'any';
  if (schema.enum) return 'enum';
  if (schema.const !== undefined) return 'const';
  if (schema.anyOf || schema.oneOf) return 'choice';
  const t = Array.isArray(schema.type) ? schema.type.find((x) => x !== 'null') : schema.type;
  if (t) return t;
  if (schema.properties) return 'object';
  if (schema.items) return 'array';
  return 'any';
}

function isNumeric(schema) {
  const t = typeOf(schema);
  return t === 'number' || t === 'integer';
}

function describe(schema) {
  if (schema.title) return schema.title;
  const t = typeOf(schema);
  if (t === 'array') return isNumeric(schema.items) ? 'a list of numbers' : 'a list';
  if (t === 'object') return `an object (${Object.keys(schema.properties || {}).join(', ')})`;
  if (t === 'integer' || t === 'number') return 'a number';
  return t;
}

function limits(schema) {
  const out = [];
  if (schema.minimum !== undefined) out.push(`≥ ${schema.minimum}`);
  if (schema.exclusiveMinimum !== undefined) out.push(`> ${schema.exclusiveMinimum}`);
  if (schema.maximum !== undefined) out.push(`≤ ${schema.maximum}`);
  if (schema.exclusiveMaximum !== undefined) out.push(`< ${schema.exclusiveMaximum}`);
  if (schema.minLength !== undefined || schema.maxLength !== undefined)
    out.push(`${schema.minLength ?? 0} to ${schema.maxLength ?? '∞'} characters`);
  if (schema.minItems !== undefined || schema.maxItems !== undefined)
    out.push(`${schema.minItems ?? 0} to ${schema.maxItems ?? '∞'} items`);
  return out.join(', ');
}

class Form {
  constructor() {
    this.controls = new Map();   // path -> the control an error about it goes to
  }

  // A labelled field: {element, control}.
  field(name, schema, path, required, control) {
    const id = newId('p');
    control.id = id;
    control.dataset.path = path;
    const help = [schema.description, limits(schema)].filter(Boolean).join(' — ');
    let helpEl = null;
    if (help) {
      helpEl = h('p', { class: 'help', id: `${id}-help` }, help);
      control.setAttribute('aria-describedby', `${id}-help`);
    }
    if (required) {
      control.required = true;
      control.setAttribute('aria-required', 'true');
    }
    this.controls.set(path, control);
    const label = h('label', { for: id }, h('code', {}, name), required ? h('span', { class: 'req' }, ' (required)') : null);
    return h('div', { class: 'field' }, label, control, helpEl);
  }

  node(name, schema, path, required, value) {
    switch (typeOf(schema)) {
      case 'object': return this.object(name, schema, path, required, value);
      case 'enum': return this.enumNode(name, schema, path, required, value);
      case 'boolean': return this.boolNode(name, schema, path, required, value);
      case 'integer':
      case 'number': return this.numberNode(name, schema, path, required, value);
      case 'string': return this.stringNode(name, schema, path, required, value);
      case 'choice': return this.choice(name, schema, path, required, value);
      case 'const': return { element: null, get: () => ({ set: true, value: schema.const }) };
      case 'array':
        if (isNumeric(schema.items)) return this.numberList(name, schema, path, required, value);
        return this.jsonNode(name, schema, path, required, value);
      default: return this.jsonNode(name, schema, path, required, value);
    }
  }

  object(name, schema, path, required, value) {
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const v = value && typeof value === 'object' && !Array.isArray(value) ? value : {};
    const children = Object.entries(props).map(([k, s]) => {
      const given = v[k] !== undefined ? v[k] : s.default;
      return { key: k, shown: req.has(k) || given !== undefined, node: this.node(k, s, path ? `${path}.${k}` : k, req.has(k), given) };
    });
    const shown = children.filter((c) => c.shown).map((c) => c.node.element);
    const more = children.filter((c) => !c.shown).map((c) => c.node.element);
    const moreBox = more.length
      ? h('details', { class: 'more' }, h('summary', {}, `Optional${name ? ` ${name}` : ''} parameters (${more.length})`), more)
      : null;
    const body = [shown, moreBox];
    const element = name
      ? h('fieldset', { 'data-path': path },
        h('legend', {}, h('code', {}, name), required ? h('span', { class: 'req' }, ' (required)') : null),
        schema.description ? h('p', { class: 'help' }, schema.description) : null, body)
      : h('div', { class: 'root' }, body);
    if (name) this.controls.set(path, element);
    return {
      element,
      get: () => {
        const out = {};
        let any = false;
        for (const c of children) {
          const r = c.node.get();
          if (r.set) {
            out[c.key] = r.value;
            any = true;
          }
        }
        return { set: any || !name, value: out };
      },
    };
  }

  enumNode(name, schema, path, required, value) {
    const sel = h('select', {},
      h('option', { value: '' }, required ? '— choose —' : '(server default)'),
      schema.enum.map((e, i) => h('option', { value: String(i) }, typeof e === 'string' ? e : JSON.stringify(e))));
    const i = schema.enum.findIndex((e) => JSON.stringify(e) === JSON.stringify(value));
    if (i >= 0) sel.value = String(i);
    return {
      element: this.field(name, schema, path, required, sel),
      get: () => (sel.value === '' ? { set: false } : { set: true, value: schema.enum[Number(sel.value)] }),
    };
  }

  boolNode(name, schema, path, required, value) {
    const sel = h('select', {},
      h('option', { value: '' }, required ? '— choose —' : '(server default)'),
      h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
    if (value === true || value === false) sel.value = String(value);
    return {
      element: this.field(name, schema, path, required, sel),
      get: () => (sel.value === '' ? { set: false } : { set: true, value: sel.value === 'true' }),
    };
  }

  numberNode(name, schema, path, required, value) {
    const input = h('input', { type: 'number', inputmode: 'decimal', step: typeOf(schema) === 'integer' ? '1' : 'any' });
    if (schema.minimum !== undefined) input.min = schema.minimum;
    if (schema.maximum !== undefined) input.max = schema.maximum;
    if (typeof value === 'number') input.value = String(value);
    return {
      element: this.field(name, schema, path, required, input),
      get: () => {
        const t = input.value.trim();
        if (t === '') return { set: false };
        const n = Number(t);
        return { set: true, value: Number.isFinite(n) ? n : t };   // the server says what is wrong
      },
    };
  }

  stringNode(name, schema, path, required, value) {
    const input = h('input', { type: 'text', spellcheck: 'false' });
    if (schema.maxLength !== undefined) input.maxLength = schema.maxLength;
    if (typeof value === 'string') input.value = value;
    return {
      element: this.field(name, schema, path, required, input),
      get: () => (input.value === '' ? { set: false } : { set: true, value: input.value }),
    };
  }

  numberList(name, schema, path, required, value) {
    const input = h('input', { type: 'text', spellcheck: 'false', inputmode: 'decimal' });
    if (Array.isArray(value)) input.value = value.join(', ');
    const s = { ...schema, description: [schema.description, 'numbers separated by commas'].filter(Boolean).join('; ') };
    return {
      element: this.field(name, s, path, required, input),
      get: () => {
        const t = input.value.trim();
        if (t === '') return { set: false };
        return { set: true, value: t.split(/[\s,;]+/).filter(Boolean).map((x) => (Number.isFinite(Number(x)) ? Number(x) : x)) };
      },
    };
  }

  jsonNode(name, schema, path, required, value) {
    const area = h('textarea', { rows: 3, spellcheck: 'false', class: 'mono' });
    if (value !== undefined) area.value = JSON.stringify(value);
    const s = { ...schema, description: [schema.description, 'JSON'].filter(Boolean).join('; ') };
    return {
      element: this.field(name, s, path, required, area),
      get: () => {
        const t = area.value.trim();
        if (t === '') return { set: false };
        try {
          return { set: true, value: JSON.parse(t) };
        } catch {
          return { set: true, value: t };   // values() stops at it first
        }
      },
    };
  }

  // anyOf / oneOf: a select of the forms, then the chosen form's fields.
  choice(name, schema, path, required, value) {
    const variants = schema.anyOf || schema.oneOf;
    const fits = (s, v) => {
      const t = typeOf(s);
      if (v === undefined) return false;
      if (Array.isArray(v)) return t === 'array';
      if (v && typeof v === 'object') return t === 'object';
      if (typeof v === 'number') return t === 'number' || t === 'integer';
      return t === typeof v || t === 'enum';
    };
    let chosen = Math.max(0, variants.findIndex((s) => fits(s, value)));
    const sel = h('select', {}, variants.map((s, i) => h('option', { value: String(i) }, describe(s))));
    sel.value = String(chosen);
    const box = h('div', { class: 'choice-body' });
    let current = null;
    const show = (i, v) => {
      chosen = i;
      current = this.node(`${name} (${describe(variants[i])})`, variants[i], path, required, v);
      box.replaceChildren(current.element || '');
    };
    sel.addEventListener('change', () => show(Number(sel.value), undefined));
    const s = { ...schema, description: [schema.description, 'choose its form'].filter(Boolean).join('; ') };
    const element = h('div', { class: 'choice' }, this.field(`${name}: form`, s, `${path}#form`, false, sel), box);
    show(chosen, fits(variants[chosen], value) ? value : undefined);
    this.controls.set(path, sel);
    return {
      element,
      get: () => current.get(),
    };
  }
}

// schemaForm(schema, values) -> {element, values() -> params or throws {control, message},
// showError(field, message) -> true when a field took it}
export function schemaForm(schema, values = {}) {
  const form = new Form();
  const root = form.object('', schema || {}, '', true, values);
  return {
    element: root.element,
    values() {
      for (const control of form.controls.values()) {
        if (control.isConnected && control.tagName === 'TEXTAREA' && control.value.trim()) {
          try {
            JSON.parse(control.value);
          } catch (e) {
            const err = new Error(`not valid JSON: ${e.message}`);
            err.control = control;
            throw err;
          }
        }
      }
      return root.get().value;
    },
    showError(field, message, formEl) {
      if (!field) return false;
      let path = field.replace(/^params\.?/, '').replace(/\[\d+\]/g, '');
      if (field === 'params') path = '';
      while (path) {
        const control = form.controls.get(path);
        if (control && control.isConnected) {
          const target = control.tagName === 'FIELDSET' ? control.querySelector('input, select, textarea') || control : control;
          fieldError(formEl || root.element, target, message);
          return true;
        }
        path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '';
      }
      return false;
    },
  };
}
