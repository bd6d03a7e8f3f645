-- Neovim (>= 0.10) setup for Vx: filetype, the vxc language server, and (optionally)
-- the TextMate-derived highlighting via the Vim syntax file beside this one.
-- Use: put this file on your runtimepath (e.g. ~/.config/nvim/plugin/vx.lua), or
-- `:luafile editors/neovim/vx.lua`. Set vim.g.vx_target / vim.g.vx_lsp_cmd to change them.
vim.filetype.add({ extension = { vx = "vx" } })

vim.api.nvim_create_autocmd("FileType", {
  pattern = "vx",
  callback = function(args)
    vim.bo[args.buf].commentstring = "// %s"
    vim.lsp.start({
      name = "vxc",
      cmd = vim.g.vx_lsp_cmd or { "vxc", "lsp" },
      root_dir = vim.fs.root(args.buf, { "MODULE.bazel", "WORKSPACE", ".git" }),
      init_options = { target = vim.g.vx_target or "cpu" },
      settings = { vx = { target = vim.g.vx_target or "cpu" } },
    })
  end,
})
