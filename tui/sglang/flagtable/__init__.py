"""SGLang's own flag table, and the parser and checker rebuilt from it (core, no Textual).

Modules::

    table       FlagTable / FlagSpec, load_table(version), differences(a, b), PINNED_VERSION
    parser      build_parser(table): SGLang's launch parser, same prog, prefixes, converters, usage
    converters  SGLang's argparse type functions, by the name the table records
    check       check_argv(argv) -> Rejection | None: SGLang's verdict (and gpufleet's strict rule)
    rejection   Rejection: why, SGLang's own text and exit status, what is allowed, did you mean
    tokens      an argv's tokens as argparse reads them (which token a verdict is about)
    generate    python -m tui.sglang.flagtable.generate: the table from SGLang's real parser
    reference   SGLang itself, pip-installed beside the app to generate and check the table
    stubs       stand-ins for SGLang's heavy native imports (the generator's interpreter only)
    cases       argv cases through a parser, recorded as JSON (the comparison test)
"""
