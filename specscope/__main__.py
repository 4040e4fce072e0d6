from specscope.cli import main

main()
