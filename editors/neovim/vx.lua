-- Neovim (>= 0.10) setup for Vx: filetype, the vxc language server, and (optionally)
-- the TextMate-derived highlighting via the Vim syntax file beside this one.
-- Use: put this file on your runtimepath (e.g. ~/.config/nvim/plugin/vx.lua), or
-- `:luafile editors/neovim/vx.lua`. Set vim.g.vx_target / vim.g.vx_lsp_cmd to change them.
-- vim.fs.root (and vim.lsp.start's root handling) came in Neovim 0.10: say so on an older
-- one instead of failing with "attempt to index field 'fs'" when a .vx file opens.
if vim.fn.has("nvim-0.10") == 0 then
  local v = vim.version()
  vim.notify(
    string.format(
      "vx.lua needs Neovim >= 0.10 (vim.fs.root, vim.lsp.start); this is Neovim %d.%d.%d. "
        .. "The highlighting in editors/neovim/vx.vim works on any version.",
      v.major,
      v.minor,
      v.patch
    ),
    vim.log.levels.ERROR
  )
  return
end

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
