" Vim/Neovim syntax for Vx: the same token classes as editors/vscode/syntaxes/vx.tmLanguage.json.
" Install: copy to ~/.config/nvim/syntax/vx.vim (or any runtimepath syntax/ folder).
if exists("b:current_syntax") | finish | endif
syn keyword vxKeyword fn let mut on const extern relaxed sync
syn keyword vxControl for in if else return spawn where
syn keyword vxType Tensor Vec Token i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64 bool
syn keyword vxBoolean true false
syn match vxIntrinsic "\<\(transfer_async\|transfer\|wait\|matmul_acc\|matmul\|assert\)\>\ze\s*("
syn match vxPath "\<\(Memory\|Topology\)::\h\w*"
syn match vxDecl "\<\(Memory\|Topology\)\>"
syn match vxNumber "\<\d\+\(\.\d\+\)\?\(\s*\(B\|KB\|KiB\|MB\|MiB\|GB\|GiB\|TB\|TiB\)\)\?\>"
syn match vxComment "//.*$"
syn region vxBlockComment start="/\*" end="\*/"
hi def link vxKeyword Keyword
hi def link vxControl Conditional
hi def link vxType Type
hi def link vxBoolean Boolean
hi def link vxIntrinsic Function
hi def link vxPath Structure
hi def link vxDecl StorageClass
hi def link vxNumber Number
hi def link vxComment Comment
hi def link vxBlockComment Comment
let b:current_syntax = "vx"
