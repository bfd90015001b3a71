"""SGLang's own flag tables, one per release (0.5.17 to 0.5.23), and the parser and checker
rebuilt from each (core, no Textual).

Modules::

    table       FlagTable / FlagSpec, load_table(version), known_versions(), differences(a, b)
    parser      build_parser(table): SGLang's launch parser, same prog, prefixes, converters, usage
    converters  SGLang's argparse type functions, by the name the table records
    check       check_argv(argv) -> Rejection | None: SGLang's verdict (and gpufleet's strict rule)
    rejection   Rejection: why, SGLang's own text and exit status, what is allowed, did you mean
    tokens      an argv's tokens as argparse reads them (which token a verdict is about)
    generate    python -m tui.sglang.flagtable.generate: a table from its release's real parser
    describe    one argparse action as a table row (SGLang's parser, or one rebuilt)
    reference   RELEASES, and their wheels kept beside the app to generate and check the tables
    stubs       stand-ins for SGLang's heavy native imports (the generator's interpreter only)
    cases       argv cases through a parser, recorded as JSON (the comparison test)
"""
