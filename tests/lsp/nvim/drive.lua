-- Headless Neovim drives `tprules lsp` with its built-in client (Neovim 0.7 and later):
-- open a rule file, wait for its diagnostics, jump to a definition, write what it saw as JSON.
local env = vim.env
local out = {}
local id = vim.lsp.start_client({
  name = "tprules",
  cmd = { env.TPRULES_PYTHON, "-m", "tprules", "lsp" },
  root_dir = env.TPRULES_WORKSPACE,
  cmd_env = { PYTHONPATH = env.TPRULES_ROOT },
})
vim.cmd("edit " .. env.TPRULES_FILE)
vim.lsp.buf_attach_client(0, id)
out.attached = vim.wait(20000, function() return #vim.diagnostic.get(0) > 0 end, 50)
out.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, end_col = d.end_col, message = d.message,
                                  code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) })
end
-- the cursor on the relation named by TPRULES_JUMP (its first use in the file), then gd
local row = vim.fn.search(env.TPRULES_JUMP, "w")
out.from = { row = row, col = vim.fn.col(".") }
local before = vim.api.nvim_buf_get_name(0)
vim.lsp.buf.definition()
out.jumped = vim.wait(20000, function() return vim.api.nvim_buf_get_name(0) ~= before end, 50)
local cursor = vim.api.nvim_win_get_cursor(0)
out.landed = { file = vim.api.nvim_buf_get_name(0), row = cursor[1], col = cursor[2],
               line = vim.api.nvim_get_current_line() }
local f = io.open(env.TPRULES_OUT, "w")
f:write(vim.fn.json_encode(out))
f:close()
vim.lsp.stop_client(id)
vim.cmd("qa!")
