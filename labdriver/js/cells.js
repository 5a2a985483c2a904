// Every cell: type, source, tags, whether its code is hidden, its outputs (model and shown).
() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.widgets.map((c, index) => {
    const editor = c.node.querySelector('.jp-InputArea-editor');
    const box = editor ? editor.getBoundingClientRect() : null;
    return {
      index,
      type: c.model.type,
      source: c.model.sharedModel.getSource(),
      tags: c.model.getMetadata('tags') || [],
      inputHidden: !!c.inputHidden,
      executionCount: c.model.type === 'code' ? c.model.executionCount : null,
      editorVisible: !!editor && editor.offsetParent !== null && box.height > 0,
      outputs: c.model.type !== 'code' ? [] : c.model.outputs.toJSON().map((o) => ({
        output_type: o.output_type,
        name: o.name || null,
        text: Array.isArray(o.text) ? o.text.join('') : (o.text || ''),
        ename: o.ename || null,
        evalue: o.evalue || null,
        mimes: Object.keys(o.data || {}),
      })),
      shownStderr: Array.from(c.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
      )).map((n) => n.textContent),
      shownErrors: Array.from(c.node.querySelectorAll(
        '.jp-RenderedText[data-mime-type*="error"]'
      )).map((n) => n.textContent),
      outputText: c.model.type === 'code'
        ? Array.from(c.node.querySelectorAll('.jp-OutputArea')).map((n) => n.innerText).join('\n')
        : '',
    };
  });
}
