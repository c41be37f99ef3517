-- tprules lsp in Neovim (0.7 or later): put this file on your runtimepath, or `luafile` it
-- from init.lua. Every `.dl` buffer gets the server, started once per workspace root.
-- The program folder for tuple counts and code lenses comes from `tprules.toml` at the root
-- (program = "facts/llama-layer-tp4"), or set vim.g.tprules_program before loading this file.
local clients = {}

-- once the server has started: code lenses on open and after each edit
local function on_attach(_, buf)
  vim.lsp.codelens.refresh()
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "TextChanged" }, {
    buffer = buf, callback = function() vim.lsp.codelens.refresh() end })
end

local function root_of(file)
  local dir = vim.fn.fnamemodify(file, ":p:h")
  local found = vim.fn.findfile("tprules.toml", dir .. ";")
  if found ~= "" then return vim.fn.fnamemodify(found, ":p:h") end
  local rules = vim.fn.finddir("rules", dir .. ";")
  return rules ~= "" and vim.fn.fnamemodify(rules, ":p:h:h") or dir
end

local function attach(args)
  local root = root_of(vim.api.nvim_buf_get_name(args.buf))
  if not clients[root] then
    clients[root] = vim.lsp.start_client({
      name = "tprules",
      cmd = { vim.g.tprules_command or "tprules", "lsp" },
      root_dir = root,
      init_options = vim.g.tprules_program and { program = vim.g.tprules_program } or nil,
      on_attach = on_attach,
    })
  end
  vim.lsp.buf_attach_client(args.buf, clients[root])
  vim.bo[args.buf].omnifunc = "v:lua.vim.lsp.omnifunc"  -- <C-x><C-o> completes
  local map = function(keys, fn) vim.keymap.set("n", keys, fn, { buffer = args.buf }) end
  map("gd", vim.lsp.buf.definition)
  map("gr", vim.lsp.buf.references)
  map("K", vim.lsp.buf.hover)
  map("gO", vim.lsp.buf.document_symbol)
end

vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile" }, { pattern = "*.dl", callback = attach })
-- show each diagnostic's code (the check that found it) beside its message
local function with_code(d)
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  return code and string.format("%s [%s]", d.message, code) or d.message
end
vim.diagnostic.config({ virtual_text = { format = with_code }, float = { format = with_code } })
